"""`iobench sweep` and `iobench diagnose`: their arguments and the command. Importing this module
is cheap (the parser is built for every command); the work imports what it needs."""

from __future__ import annotations

import argparse
import datetime as dt
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from iobench.cell.protocol import NodePlace
    from iobench.sweep.config import SweepConfig
    from iobench.sweep.datasetspec import DatasetSpec
    from iobench.sweep.estimate import CellEstimate


def at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return value


def add_sweep_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "config", nargs="?", help="sweep YAML (see configs/); with --resume and none, RUN_DIR/sweep.yaml"
    )
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default iobench-runs/<timestamp>)")
    p.add_argument(
        "--on-error", choices=("skip", "fail"), help="corrupt or unlabelled samples: skip and count, or fail"
    )
    p.add_argument(
        "--repeats", type=at_least_one, help="runs per cell, for a confidence interval (run.repeats)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override the sweep file (repeatable): a dotted key, a YAML value, e.g. loader.workers=[1,2,4] "
        "(loader./tier./accelerator. set every entry), loaders[0].batch_size=256, dataset.synth.size=[1GB,4GB]",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list the cells and an estimated duration; run, generate and contact nothing",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep in --out: cells with an ok result are skipped, failed and interrupted ones "
        "run again; refuses when the planned cells changed (unless --force)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --resume: accept a changed plan; without: start over in a run directory that holds a sweep",
    )
    p.add_argument(
        "--node-rank",
        type=int,
        metavar="K",
        help="with run.nodes > 1: this node's place, 0 .. nodes-1 (node 0 holds the rendezvous; every node "
        "runs the same sweep command with its own K and its own --out)",
    )
    p.add_argument(
        "--rdzv-endpoint",
        metavar="HOST:PORT",
        help="with run.nodes > 1: node 0's address and a free port there, the same on every node",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the results as one JSON document on stdout (the run directory and every cell's "
        "summary); what the sweep says as it goes goes to stderr",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="live progress and ETA (default: on when stdout is a terminal)",
    )


def _flag_overrides(args: argparse.Namespace) -> list[str]:
    """The command's own flags, as overrides of the sweep file, so sweep.yaml records them."""
    out = []
    if args.on_error:
        out.append(f"run.on_error={args.on_error}")
    if args.repeats:
        out.append(f"run.repeats={args.repeats}")
    if args.command == "diagnose":
        out.append("run.diagnose=true")
    return out


def node_place(args: argparse.Namespace, nodes: int, required: bool = True) -> NodePlace | None:
    """This node's place in a multi-node sweep, checked against run.nodes (a plan needs none)."""
    from iobench.cell.protocol import NodePlace

    given = args.node_rank is not None or args.rdzv_endpoint is not None
    if nodes == 1:
        if given:
            raise ValueError("--node-rank/--rdzv-endpoint: only for a sweep with run.nodes > 1")
        return None
    if not given and not required:
        return None
    if args.node_rank is None or args.rdzv_endpoint is None:
        raise ValueError(
            f"run.nodes={nodes}: run the same sweep on every node with --node-rank K (0 .. {nodes - 1}) and "
            "--rdzv-endpoint HOST:PORT (node 0's address and a free port, the same everywhere); see "
            "docs/scale-out.md"
        )
    if not 0 <= args.node_rank < nodes:
        raise ValueError(f"--node-rank={args.node_rank}: expected 0 .. {nodes - 1} (run.nodes={nodes})")
    host, _, port = args.rdzv_endpoint.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"--rdzv-endpoint={args.rdzv_endpoint!r}: expected HOST:PORT, e.g. node0.example:29500"
        )
    return NodePlace(args.node_rank, args.rdzv_endpoint)


def sweep_command(args: argparse.Namespace, console: Console) -> int:
    if args.json:  # stdout carries only the document
        from rich.console import Console as RichConsole

        console = RichConsole(stderr=True)
    from iobench.analysis import decoderate
    from iobench.sweep.config import load_config
    from iobench.sweep.estimate import estimate_plan
    from iobench.sweep.rundir import SWEEP_FILE

    if args.resume and not args.out:
        raise ValueError("--resume needs --out RUN_DIR: the run directory of the sweep to continue")
    run_dir = Path(args.out or f"iobench-runs/{dt.datetime.now():%Y%m%d-%H%M%S}").absolute()
    source = args.config
    if source is None and args.resume and (run_dir / SWEEP_FILE).exists():
        source = run_dir / SWEEP_FILE
    config = load_config(source, [*args.set, *_flag_overrides(args)])
    decode = decoderate.resolve()  # this host's calibration, else the reference assumption
    estimates = estimate_plan(config.datasets, config.cells(), decode)
    place = node_place(args, config.run.settings.nodes, required=not args.dry_run)
    if args.dry_run:
        from iobench.sweep.dryrun import print_plan

        print_plan(console, config, estimates, decode, run_dir if args.resume else None)
        if args.json:
            import json

            from iobench.results.codec import to_json

            plan = [{"cell": to_json(c), "estimated_s": estimates[c.cell_id].seconds} for c in config.cells()]
            print(json.dumps({"planned": plan, "decode_rate": decode.as_dict()}, indent=2))
        return 0
    return _run(args, config, run_dir, estimates, console, place)


def _ensure_datasets(config: SweepConfig, datasets: list[DatasetSpec], console: Console) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from iobench.sweep.runner import ensure_datasets

    if not any(d.synth is not None for d in datasets) and "objects" not in config.layouts():
        return
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(), console=console
    ) as bar:
        tasks = {d.path: bar.add_task(f"dataset {d.path}", total=None) for d in datasets}
        ensure_datasets(
            config,
            datasets,
            progress=lambda d, done, total: bar.update(tasks[d.path], completed=done, total=total),
        )


def _run(
    args: argparse.Namespace,
    config: SweepConfig,
    run_dir: Path,
    estimates: dict[str, CellEstimate],
    console: Console,
    place: NodePlace | None,
) -> int:
    from iobench.report.terminal import print_report
    from iobench.sweep.progress import SweepProgress
    from iobench.sweep.runner import Sweep, SweepInterrupted, upload_to_tiers

    with Sweep(config, run_dir, resume=args.resume, force=args.force, place=place) as sweep:
        resumed, todo = sweep.resumed, sweep.todo()
        console.print(
            f"[bold]iobench {args.command}[/bold] {config.source}: {len(sweep.cells)} cell(s) -> {run_dir}"
        )
        if resumed.interrupted:
            s = resumed.interrupted
            console.print(
                f"{s.cell_id} was running when the last sweep died (started {s.started_at}): "
                "recorded as interrupted; it runs again"
            )
        if resumed.replanned:
            console.print(f"re-planned (--force): {'; '.join(resumed.replanned)} cell(s)")
        _print_notes(console, sweep)
        if args.resume:
            console.print(f"resuming: {len(resumed.done)} cell(s) done and kept, {len(todo)} to run")
        needed = [d for d in config.datasets if any(c.dataset == str(d.path) for c in todo)]
        _ensure_datasets(config, needed, console)
        for line in upload_to_tiers(config, needed):
            console.print(f"staged {line}")
        tty = console.is_terminal
        mode = (
            ("live" if tty else "lines")
            if args.progress
            else ("live" if tty and args.progress is None else "off")
        )
        try:
            with SweepProgress(console, sweep.cells, estimates, resumed.done, mode) as progress:
                summaries = sweep.run(progress)
        except SweepInterrupted as exc:
            _print_notes(console, sweep)
            name = signal.Signals(exc.signum).name
            console.print(
                f"\n[yellow]stopped by {name}[/yellow]: {exc.cell_id or 'no cell'} recorded as interrupted. "
                f"Continue with: iobench {args.command} --resume --out {run_dir}"
            )
            return 128 + exc.signum
    _print_notes(console, sweep)
    console.print()
    print_report(summaries, console, title=f"iobench {args.command}")
    console.print(f"\nresults: {run_dir / 'results.parquet'}")
    if args.json:
        import json

        from iobench.results.codec import to_json

        print(json.dumps({"run_dir": str(run_dir), "cells": [to_json(s) for s in summaries]}, indent=2))
    from iobench.analysis.decoderate import keep_from_run

    keep_from_run(run_dir)  # the estimate and recommend then use what this host measured
    return 0 if all(s.ok for s in summaries) else 1


def _print_notes(console: Console, sweep) -> None:
    """What the sweep did beside its cells (RAM caches found, removed, kept), once each."""
    from rich.text import Text

    for note in sweep.notes:
        console.print(Text(note))
    sweep.notes.clear()
