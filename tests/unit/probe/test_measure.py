"""A rank's measurement from its records: which worker batch each step took, the readers' time over
the window split into CPU, waiting for a core and blocked, and the window's end where the probe set it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from iobench.probe.batches import match
from iobench.probe.measure import rank_runs
from iobench.probe.reader import Follower
from iobench.probe.steps import Step
from iobench.probe.workers import loader_work
from tests.unit.probe.jobkit import Loop


def _step(i: int, t: float, samples: int = 4, epoch: int = 0) -> Step:
    return Step(i, epoch, t, t + 0.1, t + 0.2, samples, 0, 0.01)


def _fetch(worker: int, t0: float, samples: int = 4) -> SimpleNamespace:
    return SimpleNamespace(worker=worker, t0=t0, t1=t0 + 0.05, samples=samples)


def test_batches_go_round_robin_over_the_workers_within_an_epoch():
    steps = [_step(i, 1.0 + i) for i in range(6)]
    # two workers, each making its batches in order; worker 1 ran ahead of worker 0
    fetches = [_fetch(1, 0.5), _fetch(0, 0.6), _fetch(1, 0.7), _fetch(0, 1.8), _fetch(1, 2.0), _fetch(0, 3.0)]
    made = match(steps, fetches, [0.0], workers=2, iterable=False)
    assert [(f.worker, f.t0) for f in made] == [(0, 0.6), (1, 0.5), (0, 1.8), (1, 0.7), (0, 3.0), (1, 2.0)]


def test_a_new_epoch_starts_again_at_worker_0_and_a_count_that_differs_is_not_matched():
    steps = [_step(0, 1.0), _step(1, 2.0, samples=3), _step(2, 11.0, epoch=1)]
    fetches = [_fetch(0, 0.5), _fetch(1, 0.6, samples=4), _fetch(0, 10.5)]
    made = match(steps, fetches, [0.0, 10.0], workers=2, iterable=False)
    assert made[0].t0 == 0.5 and made[1] is None and made[2].t0 == 10.5
    assert match(steps, fetches, [0.0, 10.0], workers=2, iterable=True) == [None, None, None]


def test_without_workers_the_batch_is_made_inside_its_own_next():
    steps = [_step(0, 1.0), _step(1, 2.0)]
    inside = [
        SimpleNamespace(worker=-1, t0=1.02, t1=1.08, samples=4),
        SimpleNamespace(worker=-1, t0=2.01, t1=2.09, samples=4),
    ]
    assert match(steps, inside, [0.0], workers=0, iterable=False) == inside


def test_the_readers_time_splits_into_cpu_a_wait_for_a_core_and_blocked():
    fetch = SimpleNamespace(
        t0=1.0,
        t1=1.1,
        get_wall=0.09,
        get_cpu=0.02,
        get_runq=0.01,
        collate_wall=0.01,
        collate_cpu=0.008,
        collate_runq=0.0,
        samples=10,
        rchar=1_000_000,
        read_bytes=0,
    )
    work = loader_work(
        [fetch, SimpleNamespace(**{**fetch.__dict__, "t0": 5.0, "t1": 5.1})], 0.0, 2.0, readers=1
    )
    assert work.samples == 10 and work.batches == 1  # the second batch ended outside
    assert work.cpu_ms == pytest.approx(2.0)
    assert work.blocked_ms == pytest.approx(6.0)
    assert work.runq_ms == pytest.approx(1.0)
    assert work.collate_ms == pytest.approx(1.0)
    assert work.busy == pytest.approx(0.05)
    assert work.capacity == pytest.approx(100.0)
    assert work.bytes_per_sample == 100_000


def test_a_rank_run_ends_where_the_probe_set_the_window_and_keeps_the_warmup_it_closed_with(tmp_path):
    Loop(steps=60, workers=2, replayed=10).write(tmp_path)
    job = Follower(tmp_path).read()
    (run,) = rank_runs(job, 50, {"4242-0": 5})
    assert len(run.steps) == 50 and run.warmup == 5 and len(run.window) == 45
    assert all(b is not None for b in run.batches)  # every batch matched to its making
    assert run.bytes_read[10] == 16 * 100_000
    assert run.step_alone is not None and run.step_alone.steps == 7  # the first 3 replayed settle
    assert run.step_alone.samples_per_s == pytest.approx(16 / 0.005, rel=1e-6)
    assert run.work is not None and run.work.cpu_ms == pytest.approx(20 / 16)
