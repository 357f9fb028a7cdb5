"""A synchronous job's figures from its ranks' step rows: the steps every rank completed, the time
each rank spent waiting for its data, for its peers and in the all-reduce, and what peers cost."""

from __future__ import annotations

import pytest

from iobench.cell.rankmetrics import RankRun, aggregate
from iobench.cell.steploop import StepLog
from iobench.results.figures import StepRow, Verdict
from loaders import StageStats


def _rank(rank: int, waits: list[float], peers: list[float], compute=0.02, allreduce=0.005) -> RankRun:
    rows, t = [], 0.0
    for i, (w, p) in enumerate(zip(waits, peers, strict=True)):
        end = t + w + p + compute + allreduce
        rows.append(StepRow(i, 0, i == 0, t, w, 0.0, compute, end, 8, 800, rank, p, allreduce))
        t = end
    verdict = Verdict(bound="fetch" if rank else "prep", binding_stage=None, headline="")
    return RankRun(
        rank, rank, 0, "h", 1, StepLog(rows=rows, epoch_stats=[StageStats()]), verdict, "fixed", 0.0
    )


def test_a_synchronous_job_counts_the_steps_every_rank_completed():
    # rank 1 waits 100 ms for its data every step; rank 0 waits 10 ms, then 90 ms for rank 1
    slow = _rank(1, [0.1] * 10, [0.0] * 10)
    fast = _rank(0, [0.01] * 9, [0.09] * 9)  # one step fewer: the job's window ends at step 8
    agg = aggregate([fast, slow], synchronous=True)
    assert agg.steps == 8 and agg.metrics.samples == 2 * 8 * 8  # steps 1..8, both ranks, 8 samples each
    wall = agg.end - agg.start
    assert wall == pytest.approx(8 * 0.125)
    assert agg.metrics.samples_per_s == pytest.approx(128 / wall)
    assert agg.peer_wait_fraction == pytest.approx((8 * 0.09) / (2 * wall))
    assert agg.slowest.rank == 1  # the one the other waited for
    fast_rank = agg.ranks[0]
    assert fast_rank.free_running_au == pytest.approx(8 * 0.02 / (wall - 8 * 0.09))
    assert (
        agg.straggler_cost == pytest.approx(agg.free_running_au - agg.metrics.au)
        and agg.straggler_cost > 0.05
    )


def test_free_running_ranks_sum_what_each_delivered():
    fast = _rank(0, [0.01] * 20, [0.0] * 20)
    slow = _rank(1, [0.1] * 10, [0.0] * 10)
    agg = aggregate([fast, slow], synchronous=False)
    assert agg.metrics.samples_per_s == pytest.approx(sum(r.samples_per_s for r in agg.ranks))
    assert agg.peer_wait_fraction == 0.0 and agg.straggler_cost == pytest.approx(0.0)
    assert agg.slowest.rank == 1  # by samples/s


def test_the_job_counts_each_devices_busy_time_and_its_trainers_host():
    from dataclasses import replace

    from iobench.results.figures import StepAlone

    # an emulated trainer's step: 20 ms of compute of which 8 ms on the device (the host worked the
    # rest); rank 0 alone steps in 10 ms, rank 1 in 20 ms; each step's batch took its readers 6 ms
    # of CPU in worker processes
    runs = []
    for rank, alone_s in ((0, 0.010), (1, 0.020)):
        run = _rank(rank, [0.01] * 10, [0.0] * 10)
        run.log.rows[:] = [
            replace(r, device_s=0.008, trainer_cpu_s=0.015, reader_cpu_s=0.006) for r in run.log.rows
        ]
        runs.append(
            replace(run, alone=StepAlone(alone_s, alone_s, None, 0.015, 10), au_basis="emulated device time")
        )
    agg = aggregate(runs, synchronous=True)
    wall = agg.end - agg.start
    # device busy over every rank's time, not compute: the steps inside, and the parts of the
    # steps across the interval's edges that ran inside it
    busy = sum(e.device for e in agg.entries if agg.start <= e.start_s and e.end_s <= agg.end)
    assert agg.metrics.au == pytest.approx(busy / (2 * wall), rel=0.05)
    assert agg.metrics.au == pytest.approx(agg.split.device)
    assert sum(agg.split.parts().values()) == pytest.approx(1.0)
    assert agg.metrics.au_basis == "emulated device time"
    assert agg.metrics.step_alone_s == pytest.approx(0.010)  # the median rank's (the lower of two)
    assert agg.metrics.trainer_slowdown == pytest.approx((0.02 / 0.010 + 0.02 / 0.020) / 2)
    assert agg.metrics.trainer_cpu_ms_per_step == pytest.approx(15.0)
    assert agg.metrics.loader_cores == pytest.approx(2 * 0.006 * agg.steps / wall, rel=0.15)
    # the epochs, weighted by their window seconds, give the job's AU
    epochs = agg.epochs
    weighted = sum(e.window_au * e.window_s for e in epochs if e.window_au is not None)
    assert weighted / sum(e.window_s for e in epochs) == pytest.approx(agg.metrics.au)
