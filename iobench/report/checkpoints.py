"""Checkpoint cells in a report: one row per cell (its saves, its restores, what it cost training)
and the verdict sentence per destination and interval, the same words in the terminal and the HTML."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

from iobench.analysis.checkpointverdict import sentence
from iobench.results.checkpoint import CheckpointFigures
from iobench.results.choices import CheckpointMode
from iobench.results.summary import CellSummary


@dataclass(frozen=True)
class CheckpointRow:
    cell_id: str
    writer: str
    mode: CheckpointMode
    every_steps: int
    state: str
    save_gb_s_node: float
    save_s: float
    save_p99_ms: float | None
    restore_cold_gb_s: float | None
    restore_warm_gb_s: float | None
    blocked_s: float
    slowed: str
    au_with: float
    au_without: float | None
    cost: float | None
    save_alone_gb_s: float | None = None  # a save after training, the loader gone
    x_fio_write: float | None = None  # that save over fio's direct write, same device, same run
    x_fio_read: float | None = None


def _figures(summaries: list[CellSummary]) -> list[tuple[str, CheckpointFigures]]:
    return [
        (s.cell_id, s.checkpoint)
        for s in summaries
        if s.ok and s.checkpoint is not None and s.checkpoint.cost
    ]


def checkpoint_rows(summaries: list[CellSummary]) -> list[CheckpointRow]:
    rows = []
    for cell_id, f in _figures(summaries):
        c = f.cost
        assert c is not None
        slowed = (
            f"{c.slowed_steps} × {c.slowed_step_ratio:.2f}" if c.slowed_step_ratio else f"{c.slowed_steps}"
        )
        rows.append(
            CheckpointRow(
                cell_id=cell_id,
                writer=f.writer,
                mode=f.settings.mode,
                every_steps=f.settings.every_steps,
                state=f.settings.state_said,
                save_gb_s_node=f.save.gb_per_s_per_node,
                save_s=f.save.seconds_mean,
                save_p99_ms=f.save.request_ms.p99,
                restore_cold_gb_s=f.restore_cold.gb_per_s_per_node if f.restore_cold else None,
                restore_warm_gb_s=f.restore_warm.gb_per_s_per_node if f.restore_warm else None,
                blocked_s=c.blocked_s_per_save,
                slowed=slowed,
                au_with=c.au_with,
                au_without=c.au_without,
                cost=c.cost,
                save_alone_gb_s=f.save_alone.gb_per_s_per_node if f.save_alone else None,
                x_fio_write=f.save_alone.gb_per_s_per_node / f.fio_write_gb_per_s
                if f.fio_write_gb_per_s and f.save_alone
                else None,
                x_fio_read=f.restore_cold.gb_per_s_per_node / f.fio_read_gb_per_s
                if f.fio_read_gb_per_s and f.restore_cold
                else None,
            )
        )
    return rows


def checkpoint_verdicts(summaries: list[CellSummary]) -> list[str]:
    """One sentence per destination, interval, accelerator and rank count, over its modes."""
    figures = _figures(summaries)
    # (destination, interval, accelerator, ranks per node) -> that group's figures
    by: dict[tuple[str, int, str, int], list[CheckpointFigures]] = {}
    for cell_id, f in figures:
        s = next(x for x in summaries if x.cell_id == cell_id)
        key = (
            f.settings.destination.name,
            f.settings.every_steps,
            s.cell.accelerator.label,
            s.cell.run.ranks_per_node,
        )
        by.setdefault(key, []).append(f)
    out = []
    for (dest, _, acc, ranks), group in sorted(by.items(), key=lambda kv: tuple(map(str, kv[0]))):
        out.append(f"{dest}, {acc}" + (f", {ranks} ranks" if ranks > 1 else "") + f": {sentence(group)}")
    return out


def checkpoint_table(summaries: list[CellSummary]) -> Table | None:
    rows = checkpoint_rows(summaries)
    if not rows:
        return None
    table = Table(title="checkpoints: saves, restores and what they cost training")
    for name in (
        "cell",
        "writer",
        "save GB/s/node",
        "s/save",
        "p99 ms",
        "restore cold",
        "warm",
        "blocked s/save",
        "slowed steps",
        "AU with",
        "without",
        "cost",
        "save alone",
        "× fio w",
        "× fio r",
    ):
        table.add_column(name, justify="left" if name in ("cell", "writer") else "right")
    for r in rows:
        table.add_row(
            r.cell_id,
            r.writer,
            f"{r.save_gb_s_node:.2f}",
            f"{r.save_s:.2f}",
            _ms(r.save_p99_ms),
            _gbs(r.restore_cold_gb_s),
            _gbs(r.restore_warm_gb_s),
            f"{r.blocked_s:.3f}",
            r.slowed,
            f"{r.au_with:.3f}",
            _x(r.au_without, "{:.3f}"),
            _x(None if r.cost is None else 100 * r.cost, "{:.1f} %"),
            _x(r.save_alone_gb_s),
            _x(r.x_fio_write),
            _x(r.x_fio_read),
        )
    return table


def _gbs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _x(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"
