"""Batches replayed through a loader's queue into ranks that step together (analysis/queue.py):
closed forms for a synthetic producer with a periodic stall, and an event-by-event simulation of
the same queue (with and without a reader ahead of the workers) that the vectorised replay must
match."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from iobench.analysis.queue import NO_QUEUE, LoaderQueue, synchronous_waits

C = 0.1  # the step after the data (compute and the rest), seconds


def _staggered_stalls(ranks: int, steps: int, fast: float, stall: float, period: int) -> np.ndarray:
    """Each rank's worker takes ``fast`` per batch but ``stall`` every ``period``-th, rank r's
    stalls at steps r, r + period, ...: with ``ranks == period`` some rank stalls at every step."""
    made = np.full((ranks, steps), fast)
    for r in range(ranks):
        made[r, r::period] = stall
    return made


def _steady_step(waits: np.ndarray, skip: int = 50) -> float:
    return float(waits[..., skip:].mean()) + C


@pytest.mark.parametrize(
    ("queue", "step"),
    [
        # no queue: every step waits for the rank that stalls on it, 3C, then computes
        (NO_QUEUE, 4 * C),
        # one request in flight: a stalled batch was asked for when the last one was taken, a step
        # earlier, so it costs 3C - (wait + C) more: wait = C in the steady state
        (LoaderQueue(1, 1), 2 * C),
        # a queue deeper than a stall is long (3 steps), refilled between stalls (mean production
        # 0.75 C < C): the tail is absorbed, the job runs at the consumer's pace
        (LoaderQueue(1, 4), C),
        (LoaderQueue(2, 2), C),
    ],
)
def test_a_periodic_stall_costs_what_the_closed_form_says(queue: LoaderQueue, step: float) -> None:
    made = _staggered_stalls(10, 400, fast=0.5 * C, stall=3 * C, period=10)
    waits, _ = synchronous_waits(made, np.zeros_like(made), queue, C)
    assert _steady_step(waits) == pytest.approx(step, rel=1e-9)


def test_a_slow_producer_sets_the_pace_however_deep_the_queue() -> None:
    # production 1.5 C per batch per worker, two workers: 0.75 C per batch, faster than the step;
    # one worker: 1.5 C, the job steps at the producer's pace
    made = np.full((4, 300), 1.5 * C)
    one, _ = synchronous_waits(made, np.zeros_like(made), LoaderQueue(1, 8), C)
    two, _ = synchronous_waits(made, np.zeros_like(made), LoaderQueue(2, 2), C)
    assert _steady_step(one) == pytest.approx(1.5 * C) and _steady_step(two) == pytest.approx(C)


def test_without_workers_a_step_waits_for_the_slowest_ranks_batch() -> None:
    rng = np.random.default_rng(0)
    made, taking = rng.exponential(0.02, (3, 5, 100)), rng.exponential(0.001, (3, 5, 100))
    waits, _ = synchronous_waits(made, taking, NO_QUEUE, C)
    assert waits == pytest.approx((made + taking).max(axis=-2))


def _event_by_event(
    made: np.ndarray, taking: np.ndarray, queue: LoaderQueue, rest: float, ahead: np.ndarray | None = None
) -> np.ndarray:
    """The same job simulated one event at a time: requests into each worker's FIFO, a worker
    making one batch at a time (and, with a reader ahead of it, done no sooner than ``ahead`` after
    its previous batch), each rank taking its batch in order, a request for batch ``k + depth``
    sent when batch ``k`` is taken, the next step asked for ``rest`` after the slowest rank took
    its batch."""
    ranks, steps = made.shape
    events: list[tuple[float, int, str, int, int]] = []
    seq = iter(range(10**9))

    def at(t: float, kind: str, r: int, k: int) -> None:
        heapq.heappush(events, (t, next(seq), kind, r, k))

    fifo = [[[] for _ in range(queue.workers)] for _ in range(ranks)]
    busy = [[False] * queue.workers for _ in range(ranks)]
    ready = [dict() for _ in range(ranks)]
    asked_at, step, took = 0.0, 0, [None] * ranks
    waits = np.empty(steps)

    finished = np.zeros((ranks, queue.workers))  # when each worker finished its last batch

    def start_next(r: int, w: int, t: float) -> None:
        if not busy[r][w] and fifo[r][w]:
            k = fifo[r][w].pop(0)
            busy[r][w] = True
            paced = finished[r, w] + ahead[r, k] if ahead is not None else -np.inf
            at(max(t + made[r, k], paced), "made", r, k)

    def request(r: int, k: int, t: float) -> None:
        if k < steps:
            fifo[r][k % queue.workers].append(k)
            start_next(r, k % queue.workers, t)

    def try_take(r: int) -> None:
        if took[r] is None and step in ready[r]:
            at(max(asked_at, ready[r][step]) + taking[r, step], "taken", r, step)
            took[r] = -1.0  # taking

    for r in range(ranks):
        for k in range(queue.depth):
            request(r, k, 0.0)
        try_take(r)
    while step < steps:
        t, _, kind, r, k = heapq.heappop(events)
        if kind == "made":
            busy[r][k % queue.workers] = False
            finished[r, k % queue.workers] = t
            ready[r][k] = t
            start_next(r, k % queue.workers, t)
            try_take(r)
        elif kind == "taken":
            took[r] = t
            request(r, k + queue.depth, t)
            if all(x is not None and x >= 0 for x in took):
                everyone = max(took)
                waits[step] = everyone - asked_at
                at(everyone + rest, "ask", -1, step + 1)
        elif kind == "ask":
            asked_at, step, took = t, k, [None] * ranks
            if step < steps:
                for q in range(ranks):
                    try_take(q)
    return waits


@pytest.mark.parametrize(
    "queue", [LoaderQueue(1, 1), LoaderQueue(1, 3), LoaderQueue(2, 2), LoaderQueue(3, 1)]
)
def test_the_replay_matches_an_event_by_event_simulation(queue: LoaderQueue) -> None:
    rng = np.random.default_rng(7)
    made = rng.lognormal(np.log(0.05), 1.0, (3, 200))
    taking = rng.exponential(0.002, (3, 200))
    expected = _event_by_event(made, taking, queue, C)
    assert synchronous_waits(made, taking, queue, C)[0] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("queue", [LoaderQueue(1, 1), LoaderQueue(1, 3), LoaderQueue(2, 2)])
def test_bytes_read_ahead_replay_as_an_event_by_event_simulation(queue: LoaderQueue) -> None:
    # a reader ahead of its worker (one object per sample, reads in flight): a batch paced by its
    # bytes is done ``ahead`` after the worker's previous batch, sometimes long after (a tail)
    rng = np.random.default_rng(11)
    made = rng.lognormal(np.log(0.01), 0.5, (3, 200))
    ahead = rng.lognormal(np.log(0.03), 1.2, (3, 200))
    ahead[:, ::7] = -np.inf  # nothing read ahead (an epoch's first batch)
    taking = rng.exponential(0.002, (3, 200))
    expected = _event_by_event(made, taking, queue, C, ahead)
    got = synchronous_waits(made, taking, queue, C, ahead=ahead)[0]
    assert got == pytest.approx(expected, abs=1e-12)
    assert got.mean() > synchronous_waits(made, taking, queue, C)[0].mean() + 0.001  # the bytes count


@pytest.mark.parametrize(("ahead", "wait"), [(0.5 * C, 0.2 * C), (2 * C, C)])
def test_without_workers_a_reader_ahead_hides_its_reads_behind_the_step(ahead: float, wait: float) -> None:
    # the training process makes each batch when asked, C after its last one: 0.2 C with its bytes
    # in; paced by them, 0.5 C after its last batch (in by then: the wait is its own 0.2 C) or 2 C
    # (the wait is C, what is left of it)
    made = np.full((2, 3, 100), 0.2 * C)
    waits, _ = synchronous_waits(made, np.zeros_like(made), NO_QUEUE, C, ahead=np.full_like(made, ahead))
    assert waits[..., 1:] == pytest.approx(wait)


def test_a_compute_that_jitters_costs_each_step_the_slowest_ranks() -> None:
    # data always ready, each rank's compute uniform on [a, b]: the synchronous step takes the
    # largest of W draws, E = a + (b - a) W / (W + 1)
    a, b, ranks = 0.05, 0.15, 4
    rng = np.random.default_rng(5)
    compute = rng.uniform(a, b, (2000, ranks, 50))
    made = np.zeros_like(compute)
    waits, spans = synchronous_waits(made, made, NO_QUEUE, 0.0, compute)
    assert waits == pytest.approx(0.0)
    assert spans.mean() == pytest.approx(a + (b - a) * ranks / (ranks + 1), rel=0.005)
