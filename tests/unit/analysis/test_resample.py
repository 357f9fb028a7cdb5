"""Rank streams with the job's epochs in them (analysis/resample.py) and what they cost at scale."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from iobench.analysis.queue import LoaderQueue
from iobench.analysis.resample import Epochs, StreamDraw, epochs_of
from iobench.analysis.scale import predict_at_scale, production
from tests.helpers.summaries import queued_steps


def _epoch_rows(epochs: int = 3, steps: int = 60, start_wait: float = 0.2, wait: float = 0.005):
    """One rank without workers: every later epoch's first step waits ``start_wait``."""
    from iobench.results.figures import StepRow

    rows, t = [], 0.0
    for k in range(epochs * steps):
        w = start_wait if k and k % steps == 0 else wait
        rows.append(StepRow(k, k // steps, False, t, w, 0.0, 0.02, t + w + 0.02, 8, 0))
        t += w + 0.02
    return rows


def test_the_epochs_are_found_in_rank_and_step_order():
    ranks = [0] * 6 + [1] * 6
    epochs = [0, 0, 1, 1, 1, 2] * 2  # the first epoch cut by warm-up, the last not finished
    found = epochs_of(ranks, epochs)
    assert found == Epochs(starts=(2, 5, 8, 11), steps_at_one=6)
    assert found.length(2) == 3 and found.length(64) == 1
    assert epochs_of([0, 0, 0], [1, 1, 1]) is None  # no epoch started within the measurement


def test_every_rank_reaches_the_jobs_epoch_start_at_the_same_step():
    epochs = Epochs(starts=(60, 120), steps_at_one=60)
    index = StreamDraw(180, block=6, unit=2, epochs=epochs, segment=2)((16, 3), np.random.default_rng(0))
    at_start = np.isin(index, [60, 61, 120, 121])
    assert (at_start == at_start[:, :1]).all()  # all ranks alike
    assert (at_start.sum(axis=-1) == 2 * 180 // 20).all()  # every 20 steps at 3 ranks, 2 batches each
    # a segment is taken whole, in order
    first = index[np.isin(index, [60, 120])]
    assert (index[np.isin(index, [61, 121])] == first + 1).all()


def test_a_fixed_dataset_at_w_ranks_starts_its_epochs_w_times_as_often():
    rows = _epoch_rows()
    points = {p.world_size: p for p in predict_at_scale(rows, lambda w, c: 0.0, world_sizes=(1, 3))}
    # one rank: 3 epoch starts in its 180 steps; three ranks: one every 20 of them, the slowest of
    # three (all alike here)
    assert points[1].data_wait_s == pytest.approx((177 * 0.005 + 3 * 0.2) / 180)
    assert points[3].data_wait_s == pytest.approx((19 * 0.005 + 0.2) / 20)


def test_a_workers_delay_beyond_its_begun_stamp_is_in_its_production_time():
    made = np.full(40, 0.01)
    queue = LoaderQueue(2, 2)
    rows = queued_steps(made, queue)
    assert production(rows, queue).made == pytest.approx(made)  # stamps as the model has them
    # batch 20 begun 50 ms after its worker could have begun it (a stream starting, a late wake-up)
    late = [
        replace(r, begun_s=r.begun_s + 0.05, ready_s=r.ready_s + 0.05) if r.step == 20 else r for r in rows
    ]
    assert production(late, queue).made[20] == pytest.approx(0.06)
