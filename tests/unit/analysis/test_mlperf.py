"""The MLPerf Storage view against DLIO's own rule on a known step log (analysis/metrics.py's
dlio_au, analysis/mlperf.py): AU per epoch, their mean and population spread, pass or fail."""

from __future__ import annotations

from dataclasses import replace

import pytest
from rich.console import Console

from iobench.accelerators.demand import lookup_demand, mlperf_au_threshold
from iobench.analysis.epochs import epoch_figures
from iobench.analysis.ledger import ledger
from iobench.analysis.metrics import dlio_au, epoch_dlio_au
from iobench.analysis.mlperf import mlperf_figures, reading_of
from iobench.report.html import render_html
from iobench.report.mlperf import decoding_adds, mlperf_view
from iobench.results.figures import StepRow
from loaders import StageStats
from tests.helpers.summaries import cell_spec, metrics_of, ok_summary


def _epoch(epoch: int, start: float, waits: list[float], compute: float, rank: int = 0) -> list[StepRow]:
    rows, t = [], start
    for i, w in enumerate(waits):
        end = t + w + compute
        rows.append(StepRow(i, epoch, False, t, w, 0.0, compute, end, 64, 64 * 110_000, rank))
        t = end
    return rows


def epoch_rows(rows: list[StepRow], epochs: int):
    """The epochs' figures of one log's rows, as a cell computes them."""
    entries = ledger(rows)
    return epoch_figures(entries, [e for e in entries if not e.warmup], [StageStats() for _ in range(epochs)])


def test_dlio_au_leaves_out_the_first_steps_time_and_compute():
    # step 1 waits 1 s (start-up), then 4 steps of 0.1 s wait + 0.4 s compute: DLIO counts the
    # compute of steps 2..5 (1.6 s) over the end of step 1 to the end of step 5 (2.0 s): 0.80
    rows = _epoch(0, 0.0, [1.0, 0.1, 0.1, 0.1, 0.1], 0.4)
    assert dlio_au(ledger(rows)) == pytest.approx(0.8)
    assert dlio_au(ledger(rows[:1])) is None
    # two ranks in one epoch, weighted by their steps: (0.8 x 5 + 0.5 x 3) / 8
    other = _epoch(0, 0.0, [0.0, 0.4, 0.4], 0.4, rank=1)
    assert dlio_au(ledger(other)) == pytest.approx(0.5)
    assert epoch_dlio_au(ledger(rows + other)) == pytest.approx((0.8 * 5 + 0.5 * 3) / 8)


def test_the_view_averages_the_epochs_and_judges_the_mean_against_the_pass_mark():
    e0 = _epoch(0, 0.0, [1.0, 0.05, 0.05, 0.05, 0.05], 0.4)  # AU 1.6 / 1.8
    e1 = _epoch(1, e0[-1].t_end, [0.2, 0.0, 0.0, 0.0, 0.0], 0.4)  # AU 1.00
    rows = e0 + e1
    epochs = epoch_rows(rows, 2)
    assert [e.au_mlperf for e in epochs] == [pytest.approx(1.6 / 1.8), pytest.approx(1.0)]
    m = mlperf_figures(epochs, metrics_of(rows), accelerators=8, threshold=mlperf_au_threshold("resnet50"))
    assert m is not None and m.threshold == 0.9 and m.accelerators == 8
    mean = (1.6 / 1.8 + 1.0) / 2
    assert m.au_mean == pytest.approx(mean) and m.au_stdev == pytest.approx(
        1.0 - mean
    )  # population sd, as np.std
    assert m.passed is True  # DLIO: mean >= threshold is a success
    failing = mlperf_figures(epochs[:1], metrics_of(e0), accelerators=8, threshold=0.9)
    assert failing is not None and failing.passed is False
    assert mlperf_figures(epochs, metrics_of(rows), 1, threshold=None).passed is None
    # MiB/s are the bytes really read over the measured window
    assert m.mib_per_s == pytest.approx(metrics_of(rows).bytes_per_s / 2**20)


def test_the_mlperf_mode_au_is_dlios_rule_at_mlperf_storages_compute_time():
    # an H100 in MLPerf Storage sleeps 0.224 s per batch of 400 (DLIO's resnet50_h100.yaml)
    demand = lookup_demand("h100", "resnet50", "mlperf_storage")
    assert (demand.step_s, demand.step_batch) == (0.224, 400)
    compute = 400 / demand.samples_per_s
    assert compute == pytest.approx(0.224)
    # epoch 1: start-up (1 s), then waits 0, 0.056, 0 s: compute of steps 2..4 = 0.672 s over the end
    # of step 1 to the end of step 4 = 3 x 0.224 + 0.056 = 0.728 s -> 0.923
    # epoch 2: 0.5 s at the boundary, then 0.112 s before each step: 0.672 / (3 x 0.336) -> 0.667
    e0 = _epoch(0, 0.0, [1.0, 0.0, 0.056, 0.0], compute)
    e1 = _epoch(1, e0[-1].t_end, [0.5, 0.112, 0.112, 0.112], compute)
    rows = e0 + e1
    epochs = epoch_rows(rows, 2)
    assert [e.au_mlperf for e in epochs] == [pytest.approx(0.672 / 0.728), pytest.approx(0.672 / 1.008)]
    cell = replace(
        cell_spec(),
        loader=replace(cell_spec().loader, decode=False),
        accelerator=replace(cell_spec().accelerator, demand="mlperf_storage"),
    )
    m = mlperf_figures(epochs, metrics_of(rows), 1, mlperf_au_threshold("resnet50"), reading_of(cell))
    assert m is not None and m.reading == "mlperf"
    mean = (0.672 / 0.728 + 0.672 / 1.008) / 2  # 0.795: below MLPerf Storage's 90 %
    assert m.au_mean == pytest.approx(mean) and m.au_stdev == pytest.approx(0.672 / 0.728 - mean)
    assert m.passed is False
    # the same cell decoding, or not decoding for another compute figure, is named so
    assert reading_of(cell_spec()) == "decode"
    assert reading_of(replace(cell, accelerator=cell_spec().accelerator)) == "no decode"


def test_the_report_says_what_decoding_adds_beside_the_mlperf_mode_twin():
    nodecode = replace(
        cell_spec("disk-nodecode-torch-w2"),
        loader=replace(cell_spec().loader, decode=False),
        accelerator=replace(cell_spec().accelerator, demand="mlperf_storage"),
    )
    decoding = replace(nodecode, cell_id="disk-torch-w2", loader=replace(nodecode.loader, decode=True))
    other = replace(decoding, cell_id="disk-torch-w4", loader=replace(decoding.loader, workers=4))
    a, b, c = (ok_summary(x.cell_id, r, cell=x) for x, r in ((nodecode, 900), (decoding, 600), (other, 800)))
    a = replace(a, mlperf=mlperf_figures(_one_epoch(a), a.metrics, 1, 0.9, reading_of(nodecode)))
    b = replace(b, mlperf=mlperf_figures(_one_epoch(b), b.metrics, 1, 0.9, reading_of(decoding)))
    c = replace(c, mlperf=mlperf_figures(_one_epoch(c), c.metrics, 1, 0.9, reading_of(other)))
    lines = decoding_adds([a, b, c])
    assert len(lines) == 1  # the 4-worker cell has no twin read without decoding
    assert lines[0].startswith(
        "decoding adds (disk-torch-w2 against disk-nodecode-torch-w2): 600 vs 900 samples/s"
    )
    assert "(-33.3 %)" in lines[0]
    console = Console(width=300, record=True)
    console.print(mlperf_view([a, b, c]))
    text = console.export_text()
    assert "mlperf" in text and "decoding adds" in text
    pytest.importorskip("matplotlib")
    page = render_html([a, b, c], {}, "pair")
    assert "What decoding adds" in page and "MLPerf mode: each sample&#39;s bytes read in full" in page


def _one_epoch(s):
    """One epoch of 0.1 s steps at the helper summary's AU."""
    au = s.metrics.au
    return epoch_rows(_epoch(0, 0.0, [0.1 * (1 - au)] * 5, 0.1 * au), 1)
