"""`iobench report RUN --mlperf`: each cell laid out as MLPerf Storage's summary (DLIO's
``[METRIC]`` lines) reports it, so a submitter can put iobench's figures beside theirs."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from iobench.results.summary import CellSummary

NOTE = (
    "AU: DLIO's form per epoch (compute of steps 2..n over the time from the end of the first step to "
    "the end of the last, warm-up included), then their mean and population standard deviation, as "
    "train_au_mean_percentage and train_au_stdev_percentage; result: the mean against the model's pass "
    "mark (train_au_meet_expectation). MiB/s: the bytes the loader really read over the measured "
    "window, where DLIO multiplies samples/s by a nominal record size. docs/method.md, 'MLPerf Storage view'."
)


def _result(passed: bool | None) -> Text:
    if passed is None:
        return Text("no pass mark")
    return Text("success", "green") if passed else Text("fail", "red")


def mlperf_view(summaries: list[CellSummary]) -> RenderableType:
    table = Table(title="MLPerf Storage view", header_style="bold")
    table.add_column("cell", overflow="fold")
    for col, justify in (
        ("workload", "left"),
        ("accelerators", "right"),
        ("AU % (mean ± sd)", "right"),
        ("AU % per epoch", "left"),
        ("pass mark", "right"),
        ("result", "left"),
        ("samples/s", "right"),
        ("MiB/s read", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in summaries:
        m, acc = s.mlperf, s.cell.accelerator
        workload = f"{acc.model} on {acc.type or acc.kind} ({acc.demand})"
        if not s.ok or m is None:
            table.add_row(Text(s.cell_id), workload, "-", "-", "-", "-", Text(s.status, "red"), "-", "-")
            continue
        table.add_row(
            Text(s.cell_id),
            workload,
            str(m.accelerators),
            f"{100 * m.au_mean:.2f} ± {100 * m.au_stdev:.2f}",
            ", ".join(f"{100 * a:.1f}" for a in m.epoch_au),
            "-" if m.threshold is None else f"{100 * m.threshold:.0f} %",
            _result(m.passed),
            f"{m.samples_per_s:,.0f}",
            f"{m.mib_per_s:,.1f}",
        )
    return Group(table, Text(NOTE, style="dim"))
