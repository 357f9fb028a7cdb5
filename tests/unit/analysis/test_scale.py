"""AU at scale from a cell's steps: the order statistic of the bootstrapped waits, the loader's
queue, the all-reduce, the flag past the measured tail, and the check of a multi-rank cell against
its one-rank twin."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from iobench.analysis.queue import NO_QUEUE, LoaderQueue
from iobench.analysis.scale import block_length, predict_at_scale, replay_queue, scale_checks
from iobench.results.figures import Distributed, Interval, StepRow
from iobench.results.summary import CellSummary
from tests.helpers.summaries import cell_spec, ok_summary, queued_steps


def _rows(waits, compute=0.02, samples=64):
    rows, t = [], 0.0
    for i, w in enumerate(waits):
        rows.append(StepRow(i, 0, False, t, float(w), 0.0, compute, t + w + compute, samples, 0))
        t += w + compute
    return rows


def test_constant_waits_scale_only_by_the_allreduce():
    rows = _rows([0.01] * 200)
    points = {
        p.world_size: p for p in predict_at_scale(rows, lambda w, c: 0.001 * (w > 1), world_sizes=(1, 8, 64))
    }
    assert points[1].au == pytest.approx(0.02 / 0.03)  # one rank: the measured AU back
    assert points[8].au == pytest.approx(0.02 / 0.031) == points[64].au
    assert points[8].samples_per_s == pytest.approx(8 * 64 / 0.031)


def test_au_at_scale_counts_the_devices_busy_time_not_a_step_stretched_by_its_host():
    # an emulated trainer's step: 20 ms of host work around 9 ms of device time
    rows = [replace(r, device_s=0.009) for r in _rows([0.01] * 200)]
    points = {p.world_size: p for p in predict_at_scale(rows, lambda w, c: 0.0, world_sizes=(1, 8))}
    assert points[1].au == pytest.approx(0.009 / 0.03)  # the cell's own AU: device busy / wall
    assert points[8].au == pytest.approx(0.009 / 0.03)
    assert points[8].step_s == pytest.approx(0.03)  # the step still takes its host's time


def test_the_slowest_of_w_exponential_waits_is_the_harmonic_number_times_the_mean():
    # E[max of W iid Exp(mean m)] = m (1 + 1/2 + ... + 1/W); the bootstrap recovers it while W is
    # well inside the measured sample
    rng = np.random.default_rng(3)
    rows = _rows(rng.exponential(0.01, 4000))
    for p in predict_at_scale(rows, lambda w, c: 0.0, world_sizes=(2, 8, 64, 512), seed=1):
        harmonic = sum(1 / k for k in range(1, p.world_size + 1))
        assert p.data_wait_s == pytest.approx(0.01 * harmonic, rel=0.05), p.world_size
        assert p.au_low <= p.au <= p.au_high and not p.beyond_measured_tail


def test_more_ranks_than_steps_is_flagged_as_an_upper_bound():
    rows = _rows(np.random.default_rng(0).exponential(0.01, 50))
    point = predict_at_scale(rows, lambda w, c: 0.0, world_sizes=(512,))[0]
    assert point.beyond_measured_tail and point.data_wait_s == pytest.approx(max(r.wait_s for r in rows))


def test_the_blocks_keep_a_stall_together():
    assert block_length(1000) == 10 and block_length(1) == 1
    with pytest.raises(ValueError, match="too few"):
        predict_at_scale(_rows([0.01]), lambda w, c: 0.0)


def test_a_multi_rank_cell_is_checked_against_its_one_rank_twins_prediction():
    one = ok_summary("disk-r1", 500.0, cell=cell_spec("disk-r1"))
    one = replace(
        one, scale=tuple(predict_at_scale(_rows([0.01] * 100), lambda w, c: 0.0, world_sizes=(1, 2, 4)))
    )
    two_cell = replace(cell_spec("disk-r2"), run=replace(cell_spec("disk-r2").run, ranks_per_node=2))
    dist = Distributed(
        2, 1, 2, ("h",), Interval(0, 1, 1), 0.0, 900.0, 1e6, 1.0, 1, "h", 450.0, sync="allreduce"
    )
    two = replace(ok_summary("disk-r2", 900.0, cell=two_cell), distributed=dist)
    other = replace(two, cell=replace(two_cell, cell_id="nvme-r2", tier={"name": "nvme", "kind": "local"}))
    (check,) = scale_checks([one, two, other])  # the cell on another tier has no twin
    assert (check.cell_id, check.world_size, check.predicted_from) == ("disk-r2", 2, "disk-r1")
    assert check.error == pytest.approx(check.predicted_au / two.metrics.au - 1)
    assert isinstance(two, CellSummary)


def test_a_queue_absorbs_the_tail_that_the_model_without_one_charges_every_step():
    made = np.random.default_rng(5).lognormal(np.log(0.01), 1.0, 2000)  # mean 0.016 s < 0.02 s
    queue = LoaderQueue(2, 2)
    rows = queued_steps(made, queue)
    measured = 0.02 * len(rows) / rows[-1].t_end
    points = {
        p.world_size: p for p in predict_at_scale(rows, lambda w, c: 0.0, queue=queue, world_sizes=(1, 64))
    }
    assert points[1].au == pytest.approx(measured, rel=0.03)  # one rank: its own AU back
    # the same batches made in the training process (no workers): every step waits for the slowest
    unqueued = [replace(r, wait_s=r.ready_s - r.begun_s) for r in rows]
    without = predict_at_scale(unqueued, lambda w, c: 0.0, world_sizes=(64,))[0]
    assert without.au < 0.5 < points[64].au


def test_batches_not_stamped_are_replayed_without_a_queue():
    rows = _rows([0.01] * 100)
    assert replay_queue(rows, LoaderQueue(2, 2)) == NO_QUEUE
    assert predict_at_scale(rows, lambda w, c: 0.0, queue=LoaderQueue(2, 2)) == predict_at_scale(
        rows, lambda w, c: 0.0
    )


def test_a_compute_that_jitters_is_paid_at_its_slowest_rank():
    # no data wait, compute drawn per step (an emulated accelerator with cv 0.2): W ranks step at
    # the largest of W draws from the measured computes, whose expectation over the empirical
    # distribution is sum_i x_(i) ((i/n)^W - ((i-1)/n)^W)
    rng = np.random.default_rng(7)
    computes = rng.gamma(25.0, 0.02 / 25.0, 3000)  # mean 20 ms, cv 0.2
    rows, t = [], 0.0
    for k, c in enumerate(computes):
        rows.append(StepRow(k, 0, False, t, 0.0, 0.0, float(c), t + float(c), 64, 0, device_s=float(c)))
        t += float(c)
    x, n = np.sort(computes), len(computes)
    i = np.arange(1, n + 1)
    for p in predict_at_scale(rows, lambda w, c: 0.0, world_sizes=(1, 2, 8, 64), seed=2):
        expected = float(np.sum(x * ((i / n) ** p.world_size - ((i - 1) / n) ** p.world_size)))
        assert p.step_s == pytest.approx(expected, rel=0.02), p.world_size
        assert p.au == pytest.approx(0.02 / expected, rel=0.03)
