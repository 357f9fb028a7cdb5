"""Per-stage timers for loader workers, and a StallMeter that wraps any iterable of batches.

Stage times are measured where the work happens (inside the worker), as wall time and as the
thread's CPU time: wall time is what limits a worker's rate, CPU time tells whether the core was
the limit or something else (I/O, contention).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Generic, TypeVar

from loaders.observe.counters import LoaderCounters, LossCounts
from loaders.observe.losses import KEEP_LOSSES, Loss

STAGES = ("fetch", "decode", "augment", "collate")
# the stage clocks can be switched off so that a benchmark can measure what they cost
_timing = os.environ.get("LOADERS_INSTRUMENT", "1") != "0"
LATENCY_SAMPLE = 4096
KEEP_NOTES = 20

T = TypeVar("T")


@dataclass
class StageStats:
    """Sums over the samples a worker produced; add them up across workers and batches."""

    samples: int = 0
    bytes_read: int = 0
    wall_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    cpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    errors: Counter = field(default_factory=Counter)
    error_examples: list[str] = field(default_factory=list)
    # storage-side counters (requests, retries, faults, cache hits/misses/evictions/bytes, what was
    # lost: counters.py) and a bounded sample of request latencies, filled by the shard source
    counters: LoaderCounters = field(default_factory=LoaderCounters)
    latencies_ms: list[float] = field(default_factory=list)
    # what was said once (a cache read around, a damaged cache entry fetched again), and the
    # regions of shards a reader skipped as damaged (losses.py); both bounded, each said once
    notes: list[str] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)

    def add_time(self, stage: str, wall: float, cpu: float) -> None:
        self.wall_s[stage] += wall
        self.cpu_s[stage] += cpu

    def add_error(self, kind: str, where: str, keep: int = 5) -> None:
        self.errors[kind] += 1
        if len(self.error_examples) < keep:
            self.error_examples.append(f"{kind}: {where}")

    def add_notes(self, notes: list[str]) -> None:
        for note in notes:
            if note not in self.notes and len(self.notes) < KEEP_NOTES:
                self.notes.append(note)

    def add_loss(self, loss: Loss) -> None:
        """A region a reader skipped: counted (``counters.lost``: regions, bytes, samples where known)
        and kept while fewer than KEEP_LOSSES are."""
        self.counters.merge(
            LoaderCounters(lost=LossCounts(regions=1, bytes=loss.end - loss.begin, samples=loss.samples or 0))
        )
        if len(self.losses) < KEEP_LOSSES:
            self.losses.append(loss)

    def add_latencies(self, values: list[float]) -> None:
        room = LATENCY_SAMPLE - len(self.latencies_ms)
        self.latencies_ms.extend(values[: max(0, room)])

    def merge(self, other: StageStats) -> None:
        self.samples += other.samples
        self.bytes_read += other.bytes_read
        for stage in STAGES:
            self.wall_s[stage] += other.wall_s[stage]
            self.cpu_s[stage] += other.cpu_s[stage]
        self.errors.update(other.errors)
        room = 20 - len(self.error_examples)
        self.error_examples.extend(other.error_examples[: max(0, room)])
        self.counters.merge(other.counters)
        self.add_latencies(other.latencies_ms)
        self.add_notes(other.notes)
        self.losses.extend(other.losses[: max(0, KEEP_LOSSES - len(self.losses))])

    def per_sample_ms(self, clock: str = "wall") -> dict[str, float]:
        sums = self.wall_s if clock == "wall" else self.cpu_s
        n = max(1, self.samples)
        return {stage: 1000.0 * sums[stage] / n for stage in STAGES}

    def as_dict(self) -> dict:
        return {
            "samples": self.samples,
            "bytes_read": self.bytes_read,
            "wall_s": dict(self.wall_s),
            "cpu_s": dict(self.cpu_s),
            "errors": dict(self.errors),
            "error_examples": list(self.error_examples),
            "counters": self.counters.as_flat(),
            "request_latency_ms": _percentiles(self.latencies_ms),
            "notes": list(self.notes),
            "losses": [asdict(loss) for loss in self.losses],
        }


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    import numpy as np

    p50, p95, p99 = np.percentile(np.asarray(values), [50, 95, 99]).tolist()
    return {"p50": p50, "p95": p95, "p99": p99, "n": len(values)}


def set_timing(enabled: bool) -> None:
    """Switch the stage clocks on or off in this process and in workers started after it.
    Off, every stage time reads zero; bytes, samples, errors and storage counters still count."""
    global _timing
    _timing = enabled
    os.environ["LOADERS_INSTRUMENT"] = "1" if enabled else "0"  # spawned workers read it at import


def clocks() -> tuple[float, float]:
    """(wall, thread CPU) now; zeros with timing off."""
    return (time.perf_counter(), time.thread_time()) if _timing else (0.0, 0.0)


def since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall, thread CPU) seconds since ``start`` from :func:`clocks`; zeros with timing off."""
    if not _timing:
        return 0.0, 0.0
    return time.perf_counter() - start[0], time.thread_time() - start[1]


class Stopwatch:
    """Context manager adding a block's wall and thread-CPU time to one stage."""

    __slots__ = ("_stage", "_start", "_stats")

    def __init__(self, stats: StageStats, stage: str) -> None:
        self._stats, self._stage = stats, stage

    def __enter__(self) -> Stopwatch:
        self._start = clocks()
        return self

    def __exit__(self, *exc: object) -> None:
        if _timing:  # since() would test it again; this is the per-sample hot path
            wall0, cpu0 = self._start
            self._stats.add_time(self._stage, time.perf_counter() - wall0, time.thread_time() - cpu0)


@dataclass
class StallSummary:
    batches: int
    wall_s: float
    wait_s: float
    stall_fraction: float
    time_to_first_batch_s: float | None
    wait_p50_ms: float
    wait_p95_ms: float
    wait_p99_ms: float


class StallMeter(Generic[T]):
    """Wrap any iterable of batches and measure how long the consumer waits in ``next()``.

    ``for batch in StallMeter(my_loader): train(batch)`` — then ``meter.summary()``. The clock
    starts when the meter is built, so the time to the first batch includes the loader start-up.
    """

    def __init__(self, iterable: Iterable[T]) -> None:
        self._iterable = iterable
        self.created = time.perf_counter()
        self.waits: list[float] = []
        self.first_batch_at: float | None = None
        self.started: float | None = None
        self.finished: float | None = None

    def __iter__(self) -> Iterator[T]:
        it = iter(self._iterable)
        self.started = self.started or time.perf_counter()
        while True:
            t0 = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                self.finished = time.perf_counter()
                return
            now = time.perf_counter()
            self.waits.append(now - t0)
            if self.first_batch_at is None:
                self.first_batch_at = now
            yield batch

    def summary(self) -> StallSummary:
        import numpy as np

        end = self.finished or time.perf_counter()
        wall = end - (self.started or self.created)
        waits = np.asarray(self.waits) * 1000.0
        pct = np.percentile(waits, [50, 95, 99]) if len(waits) else [0.0, 0.0, 0.0]
        total_wait = float(sum(self.waits))
        return StallSummary(
            batches=len(self.waits),
            wall_s=wall,
            wait_s=total_wait,
            stall_fraction=total_wait / wall if wall > 0 else 0.0,
            time_to_first_batch_s=None if self.first_batch_at is None else self.first_batch_at - self.created,
            wait_p50_ms=float(pct[0]),
            wait_p95_ms=float(pct[1]),
            wait_p99_ms=float(pct[2]),
        )
