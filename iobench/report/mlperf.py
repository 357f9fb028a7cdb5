"""`iobench report RUN --mlperf`: each cell laid out as MLPerf Storage's summary (DLIO's
``[METRIC]`` lines) reports it, so a submitter can put iobench's figures beside theirs; and, for a
cell read in MLPerf mode beside the same cell decoding, what decoding adds."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from iobench.report.tables import Columns, with_columns
from iobench.results.spec import CellSpec
from iobench.results.summary import CellSummary

NOTE = (
    "AU % per epoch: DLIO's form (the device busy of steps 2..n over the time from the end of the first "
    "step to the end of the last, warm-up included; where DLIO sleeps, the device time it sleeps, so at "
    "demand mlperf_storage it is DLIO's figure), then their mean and population standard deviation, as "
    "train_au_mean_percentage and train_au_stdev_percentage; result: the mean against the model's pass "
    "mark (train_au_meet_expectation). Cell AU: the cell's own AU over its measured window (warm-up left "
    "out), on the same basis. MiB/s: the bytes the loader really read over the measured "
    "window, where DLIO multiplies samples/s by a nominal record size. reading: mlperf = each sample's "
    "bytes read in full, not decoded, at MLPerf Storage's compute time (what MLPerf Storage does); "
    "decode = decoded and augmented. docs/method.md, 'MLPerf Storage view'."
)


def _result(passed: bool | None) -> Text:
    if passed is None:
        return Text("no pass mark")
    return Text("success", "green") if passed else Text("fail", "red")


def _decoding(cell: CellSpec) -> CellSpec:
    """The cell as it would be with decoding on, its id left out: what a twin must equal."""
    return replace(cell, cell_id="", loader=replace(cell.loader, decode=True))


def decoding_adds(summaries: list[CellSummary]) -> list[str]:
    """One line per decoding cell that has a twin read without decoding (the same cell otherwise):
    what decoding and augmenting cost it, in samples/s, DLIO's AU and bytes read per second."""
    lines = []
    undecoded = [s for s in summaries if s.ok and s.mlperf and not s.cell.loader.decode]
    for s in summaries:
        if not (s.ok and s.mlperf and s.cell.loader.decode):
            continue
        twin = next((t for t in undecoded if _decoding(t.cell) == _decoding(s.cell)), None)
        if twin is None or twin.mlperf is None:
            continue
        d, n = s.mlperf, twin.mlperf
        change = d.samples_per_s / n.samples_per_s - 1 if n.samples_per_s else 0.0
        prep = sum(s.stage_ms_per_sample.get(k, 0.0) for k in ("decode", "augment"))
        lines.append(
            f"decoding adds ({s.cell_id} against {twin.cell_id}): {d.samples_per_s:,.0f} vs "
            f"{n.samples_per_s:,.0f} samples/s ({100 * change:+.1f} %), AU {100 * d.au_mean:.1f} % vs "
            f"{100 * n.au_mean:.1f} % ({100 * (d.au_mean - n.au_mean):+.1f} points), "
            f"{d.mib_per_s:,.1f} vs {n.mib_per_s:,.1f} MiB/s read; decode + augment "
            f"{prep:.2f} ms per sample in each reader"
        )
    return lines


def mlperf_view(summaries: list[CellSummary]) -> RenderableType:
    columns: Columns = (
        ("workload", "left"),
        ("reading", "left"),
        ("accelerators", "right"),
        ("cell AU %", "right"),
        ("AU % (mean ± sd)", "right"),
        ("AU % per epoch", "left"),
        ("pass mark", "right"),
        ("result", "left"),
        ("samples/s", "right"),
        ("MiB/s read", "right"),
    )
    table = Table(title="MLPerf Storage view", header_style="bold")
    table.add_column("cell", overflow="fold")
    with_columns(table, columns)
    for s in summaries:
        m, acc = s.mlperf, s.cell.accelerator
        workload = f"{acc.model} on {acc.type or acc.kind} ({acc.demand})"
        if not s.ok or m is None:
            table.add_row(
                Text(s.cell_id), workload, "-", "-", "-", "-", "-", "-", Text(s.status, "red"), "-", "-"
            )
            continue
        table.add_row(
            Text(s.cell_id),
            workload,
            Text(m.reading, "bold" if m.reading == "mlperf" else ""),
            str(m.accelerators),
            f"{100 * s.metrics.au:.2f}" if s.metrics else "-",
            f"{100 * m.au_mean:.2f} ± {100 * m.au_stdev:.2f}",
            ", ".join(f"{100 * a:.1f}" for a in m.epoch_au),
            "-" if m.threshold is None else f"{100 * m.threshold:.0f} %",
            _result(m.passed),
            f"{m.samples_per_s:,.0f}",
            f"{m.mib_per_s:,.1f}",
        )
    parts: list[RenderableType] = [table]
    parts += [Text(line) for line in decoding_adds(summaries)]
    parts.append(Text(NOTE, style="dim"))
    return Group(*parts)
