"""The MLPerf Storage view against DLIO's own rule on a known step log (analysis/metrics.py's
dlio_au, analysis/mlperf.py): AU per epoch, their mean and population spread, pass or fail."""

from __future__ import annotations

import pytest

from iobench.analysis.metrics import compute_metrics, dlio_au, epoch_dlio_au
from iobench.analysis.mlperf import mlperf_figures
from iobench.cell.demand import mlperf_au_threshold
from iobench.cell.steploop import StepLog, epoch_rows
from iobench.results.figures import StepRow
from loaders import StageStats


def _epoch(epoch: int, start: float, waits: list[float], compute: float, rank: int = 0) -> list[StepRow]:
    rows, t = [], start
    for i, w in enumerate(waits):
        end = t + w + compute
        rows.append(StepRow(i, epoch, False, t, w, 0.0, compute, end, 64, 64 * 110_000, rank))
        t = end
    return rows


def test_dlio_au_leaves_out_the_first_steps_time_and_compute():
    # step 1 waits 1 s (start-up), then 4 steps of 0.1 s wait + 0.4 s compute: DLIO counts the
    # compute of steps 2..5 (1.6 s) over the end of step 1 to the end of step 5 (2.0 s): 0.80
    rows = _epoch(0, 0.0, [1.0, 0.1, 0.1, 0.1, 0.1], 0.4)
    assert dlio_au(rows) == pytest.approx(0.8)
    assert dlio_au(rows[:1]) is None
    # two ranks in one epoch, weighted by their steps: (0.8 x 5 + 0.5 x 3) / 8
    other = _epoch(0, 0.0, [0.0, 0.4, 0.4], 0.4, rank=1)
    assert dlio_au(other) == pytest.approx(0.5)
    assert epoch_dlio_au(rows + other) == pytest.approx((0.8 * 5 + 0.5 * 3) / 8)


def test_the_view_averages_the_epochs_and_judges_the_mean_against_the_pass_mark():
    e0 = _epoch(0, 0.0, [1.0, 0.05, 0.05, 0.05, 0.05], 0.4)  # AU 1.6 / 1.8
    e1 = _epoch(1, e0[-1].t_end, [0.2, 0.0, 0.0, 0.0, 0.0], 0.4)  # AU 1.00
    log = StepLog(rows=e0 + e1, epoch_stats=[StageStats(), StageStats()])
    epochs = epoch_rows(log)
    assert [e.au_mlperf for e in epochs] == [pytest.approx(1.6 / 1.8), pytest.approx(1.0)]
    m = mlperf_figures(
        epochs, compute_metrics(log.rows), accelerators=8, threshold=mlperf_au_threshold("resnet50")
    )
    assert m is not None and m.threshold == 0.9 and m.accelerators == 8
    mean = (1.6 / 1.8 + 1.0) / 2
    assert m.au_mean == pytest.approx(mean) and m.au_stdev == pytest.approx(
        1.0 - mean
    )  # population sd, as np.std
    assert m.passed is True  # DLIO: mean >= threshold is a success
    failing = mlperf_figures(epochs[:1], compute_metrics(e0), accelerators=8, threshold=0.9)
    assert failing is not None and failing.passed is False
    assert mlperf_figures(epochs, compute_metrics(log.rows), 1, threshold=None).passed is None
    # MiB/s are the bytes really read over the measured window
    assert m.mib_per_s == pytest.approx(compute_metrics(log.rows).bytes_per_s / 2**20)
