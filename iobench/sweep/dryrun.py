"""`iobench sweep --dry-run`: the planned cells and how long each should take, and what can be
checked of them without running a cell, generating or uploading a dataset, or sending a request
(preflight.py); a problem found there is refused as a bad sweep file is."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from iobench.analysis.decoderate import DecodeRate
from iobench.results.spec import AcceleratorSpec, CellSpec
from iobench.results.store import read_summary
from iobench.sweep.checks import ConfigError
from iobench.sweep.config import SweepConfig
from iobench.sweep.estimate import CellEstimate, format_duration, method
from iobench.sweep.preflight import preflight
from iobench.sweep.rundir import CELLS_FILE, SweepState, plan_differences, saved_plan
from loaders.storage import CLIENT_NAMES, DEFAULT_CLIENT, ResolvedClient, installed_clients, resolve_client


def resume_states(run_dir: Path, cells: list[CellSpec]) -> dict[str, str]:
    """What --resume would find per cell, read-only: done (skipped), failed, interrupted (both
    re-run), changed (a result measured with another definition: re-run), or nothing yet."""
    running = SweepState(run_dir).running
    out = {}
    for cell in cells:
        summary = read_summary(run_dir, cell.cell_id)
        if running and running["cell_id"] == cell.cell_id:
            out[cell.cell_id] = "interrupted"  # or running now, in a sweep still alive
        elif summary is None:
            out[cell.cell_id] = ""
        elif summary.cell != cell:
            out[cell.cell_id] = "changed"
        else:
            out[cell.cell_id] = "done" if summary.ok else summary.status
    return out


def _accelerator(acc: AcceleratorSpec) -> str:
    if acc.kind != "emulated":
        return f"torch {acc.model}"
    rate = f" {acc.samples_per_s:g}/s" if acc.samples_per_s else ""
    return f"{acc.count} x {acc.type}{rate} {acc.model}"


def _tier(cell: CellSpec) -> str:
    """The tier's name and kind, and for S3 the object client that will read it."""
    if cell.tier_kind != "s3":
        return f"{cell.tier_name} ({cell.tier_kind})"
    asked = cell.tier.get("client", DEFAULT_CLIENT)
    try:
        client = resolve_client(asked) if isinstance(asked, str) else str(asked)
    except (ValueError, ImportError):
        client = f"{asked}: not installed"
    return f"{cell.tier_name} (s3, client {client})"


def clients_line(here: Sequence[ResolvedClient]) -> str:
    """Which object clients S3 tiers can use on this host, and how to get the others."""
    missing = [c for c in CLIENT_NAMES if c not in here]
    return f"object clients installed: {', '.join(here)}" + (
        f"; not installed: {', '.join(missing)} (pip install 'iobench[s3clients]')" if missing else ""
    )


def print_plan(
    console: Console,
    config: SweepConfig,
    estimates: dict[str, CellEstimate],
    decode: DecodeRate,
    resume_dir: Path | None = None,
) -> None:
    cells = config.cells()
    states = resume_states(resume_dir, cells) if resume_dir else {}
    table, total, todo, unknown = _plan_table(config, estimates, states, resume=resume_dir is not None)
    console.print(table)
    for d in config.datasets:
        where = "generated once if missing" if d.synth else "given"
        console.print(Text(f"dataset {d.label}: {d.path} ({where})"))
    if any(cell.tier_kind == "s3" for cell in cells):
        console.print(Text(clients_line(installed_clients())))  # its install hint holds [brackets]
    checked = preflight(config)
    for f in checked.findings:  # the errors end the dry run below, as a bad sweep file does
        if f.level == "warning":
            console.print(Text(f"warning: {f.text}", style="yellow"))
        elif f.level == "note":
            console.print(Text(f.text))
    note = (
        f"; {unknown} cell(s) without an estimate (dataset size unknown until it exists)" if unknown else ""
    )
    console.print(f"estimated total: {format_duration(total)} for {len(cells)} cell(s){note}")
    if resume_dir:
        _print_resume(console, resume_dir, states, cells, todo)
    console.print(
        f"[dim]{method(decode)} Not counted: generating or staging datasets.[/dim]", highlight=False
    )
    sent = (
        f"; {checked.connected} endpoint(s) tried with a connect, nothing sent" if checked.connected else ""
    )
    console.print(f"dry run: nothing was run, generated or uploaded{sent}")
    if checked.errors:
        raise ConfigError("\n".join(checked.errors))


_RIGHT = ("#", "workers", "batch", "samples/run", "estimate")


def _plan_table(
    config: SweepConfig, estimates: dict[str, CellEstimate], states: dict[str, str], *, resume: bool
) -> tuple[Table, float, float, int]:
    """The plan's table, the estimated seconds in all and still to run, and the cells without an estimate."""
    cells = config.cells()
    labels = {str(d.path): d.label for d in config.datasets}
    table = Table(title=f"{len(cells)} cell(s) planned from {config.source}")
    columns = [
        "#",
        "cell",
        "tier",
        "loader",
        "workers",
        "batch",
        "accelerator",
        "cache",
        "dataset",
        "samples/run",
    ]
    for col in [*columns, "estimate", *(["resume"] if resume else [])]:
        # a plan is for reading off: wrap long ids, never cut them
        table.add_column(col, justify="right" if col in _RIGHT else "left", overflow="fold")
    total = todo = 0.0
    unknown = 0
    for i, cell in enumerate(cells):
        est = estimates[cell.cell_id]
        state = states.get(cell.cell_id, "")
        if est.seconds is None:
            unknown += 1
        else:
            total += est.seconds
            todo += est.seconds if state != "done" else 0.0
        table.add_row(
            str(i + 1),
            cell.cell_id,
            _tier(cell),
            cell.loader.kind + ("" if cell.loader.layout == "shards" else f" {cell.loader.layout}"),
            str(cell.loader.workers),
            str(cell.loader.batch_size),
            _accelerator(cell.accelerator),
            cell.cache,
            labels.get(cell.dataset, cell.dataset),
            f"{est.samples:,}" if est.samples is not None else "?",
            format_duration(est.seconds) if est.seconds is not None else "?",
            *([{"done": "done: skip", "": "run"}.get(state, f"{state}: re-run")] if resume else []),
        )
    return table, total, todo, unknown


def _print_resume(
    console: Console, resume_dir: Path, states: dict[str, str], cells: list[CellSpec], todo: float
) -> None:
    """What --resume would skip and run, and whether it would refuse."""
    done = sum(1 for s in states.values() if s == "done")
    console.print(
        f"--resume: {done} cell(s) done and skipped, {len(cells) - done} to run: {format_duration(todo)}"
    )
    saved = saved_plan(resume_dir)
    if saved is None:
        console.print(f"[yellow]{resume_dir} holds no {CELLS_FILE}: --resume would refuse[/yellow]")
    elif differences := plan_differences(saved, cells):
        console.print(
            f"[yellow]the plan differs from {resume_dir / CELLS_FILE}: {'; '.join(differences)}; "
            "--resume would refuse without --force[/yellow]"
        )
