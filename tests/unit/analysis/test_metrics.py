from __future__ import annotations

import time
from dataclasses import replace

import pytest
import torch

from iobench.accelerators.consumers import EmulatedAccelerator
from iobench.accelerators.demand import Demand, lookup_demand
from iobench.cell.steps.steploop import run_steps
from iobench.results.figures import StepRow
from loaders import Batch, StageStats
from tests.helpers.summaries import judge_of, metrics_of


def _row(step, t_start, wait, compute, samples=10, warmup=False, nbytes=1000):
    return StepRow(
        step=step,
        epoch=0,
        warmup=warmup,
        t_start=t_start,
        wait_s=wait,
        h2d_s=0.0,
        compute_s=compute,
        t_end=t_start + wait + compute,
        samples=samples,
        bytes_read=nbytes,
    )


def test_metrics_from_known_rows():
    rows, t = [], 0.0
    for i, (wait, compute) in enumerate([(1.0, 0.5), (0.1, 0.4), (0.3, 0.2), (0.0, 0.5)]):
        rows.append(_row(i, t, wait, compute, warmup=(i == 0)))
        t = rows[-1].t_end
    m = metrics_of(rows, time_to_first_batch_s=1.0)
    assert m.steps == 3 and m.samples == 30
    assert m.wall_s == pytest.approx(1.5)
    assert m.compute_s == pytest.approx(1.1)
    assert m.au == pytest.approx(1.1 / 1.5)
    assert m.stall_fraction == pytest.approx(0.4 / 1.5)
    assert m.samples_per_s == pytest.approx(20.0)
    assert m.bytes_per_s == pytest.approx(2000.0)
    assert m.wait_max_ms == pytest.approx(300.0)
    # MLPerf Storage form: compute of steps 2..n over the wall after the first step
    assert m.au_mlperf == pytest.approx(1.1 / 1.5)


def test_metrics_refuse_all_warmup():
    with pytest.raises(ValueError, match="warm-up"):
        metrics_of([_row(0, 0.0, 0.1, 0.1, warmup=True)])


class _InjectedWaits:
    """Batches that take a known time to arrive."""

    def __init__(self, waits, batch=8):
        self.waits, self.batch = waits, batch

    def __iter__(self):
        for w in self.waits:
            time.sleep(w)
            stats = StageStats(samples=self.batch, bytes_read=100 * self.batch)
            yield Batch(
                images=torch.zeros(self.batch, 3, 4, 4, dtype=torch.uint8),
                labels=torch.zeros(self.batch, dtype=torch.int64),
                keys=[str(i) for i in range(self.batch)],
                stats=stats,
            )


def test_step_loop_measures_injected_waits_and_emulated_compute():
    waits = [0.05] + [0.010] * 20
    consumer = EmulatedAccelerator(Demand("x", "m", "training", samples_per_s=8 / 0.020, source="test"))
    created = time.perf_counter()
    log = run_steps(lambda e: _InjectedWaits(waits), consumer, created_at=created, warmup_steps=1)
    m = metrics_of(log.rows, log.time_to_first_batch_s)
    assert m.steps == 20 and m.samples == 160
    assert log.time_to_first_batch_s >= 0.05
    # each measured step waited its batch's 10 ms sleep and computed the 20 ms of device time at
    # least (a loaded host only lengthens sleeps: no upper bound is asserted)
    assert min(r.wait_s for r in log.rows if not r.warmup) >= 0.010
    assert min(r.device_s for r in log.rows) >= 0.020
    # the device busy is the emulated device time, and AU that busy over the wall
    assert m.device_busy_s == pytest.approx(sum(r.device_s for r in log.rows if not r.warmup))
    assert m.au == pytest.approx(m.device_busy_s / m.wall_s)
    assert m.stall_fraction + m.au <= 1.0
    assert log.epochs_completed == 1


def test_step_loop_max_steps_and_epochs():
    consumer = EmulatedAccelerator(Demand("x", "m", "training", samples_per_s=1e6, source="test"))
    log = run_steps(lambda e: _InjectedWaits([0.0] * 5), consumer, created_at=time.perf_counter(), epochs=3)
    assert len(log.rows) == 15 and log.epochs_completed == 3
    assert [r.epoch for r in log.rows] == [0] * 5 + [1] * 5 + [2] * 5
    log = run_steps(
        lambda e: _InjectedWaits([0.0] * 5), consumer, created_at=time.perf_counter(), epochs=3, max_steps=7
    )
    assert len(log.rows) == 7


def test_demand_table_has_sources_for_every_figure():
    for acc in ("a100", "h100", "h200"):
        for kind in ("training", "mlperf_storage"):
            d = lookup_demand(acc, "resnet50", kind)
            assert d.samples_per_s > 0 and len(d.source) > 40
    assert lookup_demand("h100", "resnet50", "mlperf_storage").samples_per_s == pytest.approx(400 / 0.224)


def _stats(fetch_ms, decode_ms, augment_ms, collate_ms, n=1000, io_fraction=0.0):
    s = StageStats(samples=n)
    for stage, ms in zip(
        ("fetch", "decode", "augment", "collate"), (fetch_ms, decode_ms, augment_ms, collate_ms), strict=True
    ):
        cpu = ms * (1 - io_fraction) if stage == "fetch" else ms
        s.add_time(stage, ms * n / 1000, cpu * n / 1000)
    return s


def _metrics(au, stall, rate=1000.0):
    rows = [_row(0, 0.0, 0.0, 0.0, warmup=True)]
    return replace(metrics_of([*rows, _row(1, 0.0, stall, au)]), samples_per_s=rate)


def test_verdict_prep_bound_names_decode_with_evidence():
    v = judge_of(_metrics(0.15, 0.85), _stats(0.05, 1.1, 0.35, 0.05), workers=2, cores=2, demand=7000)
    assert v.bound == "prep" and v.binding_stage == "decode"
    assert "JPEG decode" in v.headline
    assert v.pipeline_capacity_samples_per_s == pytest.approx(2000 / 1.55, rel=1e-6)
    assert "per accelerator" in v.action and "DALI mixed" in v.action


def test_verdict_fetch_bound_when_reading_dominates():
    v = judge_of(
        _metrics(0.2, 0.8), _stats(8.0, 1.0, 0.3, 0.05, io_fraction=0.9), workers=2, cores=2, demand=7000
    )
    assert v.bound == "fetch" and v.binding_stage == "fetch"
    assert any("waiting on storage" in e for e in v.evidence)


def test_verdict_accelerator_bound_at_ninety_percent():
    v = judge_of(_metrics(0.95, 0.05), _stats(0.05, 1.0, 0.3, 0.05), workers=2, cores=2, demand=500)
    assert v.bound == "accelerator" and v.binding_stage is None


def test_epoch_boundary_wait_is_the_first_wait_of_each_later_epoch():
    rows, t, step = [], 0.0, 0
    for epoch, waits in enumerate([[0.5, 0.01, 0.02], [0.09, 0.01, 0.01], [0.03, 0.02, 0.01]]):
        for wait in waits:
            rows.append(replace(_row(step, t, wait, 0.1, warmup=step == 0), epoch=epoch))
            t, step = rows[-1].t_end, step + 1
    m = metrics_of(rows)
    assert m.epoch_boundary_wait_ms == pytest.approx((90 + 30) / 2)  # epoch 0's start-up is not one
    assert metrics_of(rows[:3]).epoch_boundary_wait_ms is None  # one epoch: no boundary
    # several ranks: each rank's first step of each later epoch
    two = rows + [replace(r, rank=1, wait_s=r.wait_s * 2) for r in rows]
    assert metrics_of(two).epoch_boundary_wait_ms == pytest.approx((90 + 30 + 180 + 60) / 4)
