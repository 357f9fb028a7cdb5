"""The trainer's step alone: the consumer stepped on one batch with nothing else of the cell running.

The cell times it after its step loop (the loader's workers are gone by then) on the last batch it
trained on, and ``iobench calibrate`` on a synthetic batch: the step in the cell over this one is
the trainer's slowdown (docs/method.md, *The trainer's host*).

A busy host must not pass for a slow trainer: while the steps are timed, the host's CPU counters say
how many cores other processes used. A timing disturbed by them is taken again (at most
``ATTEMPTS`` times in all) and the least disturbed kept; whether it was quiet is recorded with it, so
nothing is judged from a timing that met a busy host. The counters see only this machine's
processes: on a virtual machine another guest's work on the same physical cores slows a step while
they read idle (here a 0.72 ms emulated step ran at 1.07 ms for a whole timing, others at 0.00
cores). An emulated trainer's fixed work that was sized in this process knows what it takes on this
host; its median well over that is the same disturbance, seen from the work's side.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Protocol

from iobench.host.cores import usable_cores
from iobench.host.cpuload import host_cpu, quiet
from iobench.results.figures import StepAlone

WARMUP_STEPS = 2  # allocator and kernel warm-up (cuDNN autotuning on a GPU)
# and at least this long: a core that idled while the trainer waited for data runs its first
# fraction of a second slow (a 1 ms emulated step timed right after a prep-bound loop took 1.7 ms,
# 1.1 ms once the core had worked 0.2 s)
WARMUP_S = 0.3
ATTEMPTS = 3


def median_interval(values: list[float]) -> tuple[float, float]:
    """The 95 % interval of the median of ``values`` by order statistics (distribution-free): the
    whole range below 6 values."""
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * math.sqrt(n) / 2
    low, high = math.floor(n / 2 - half), math.ceil(n / 2 + half) - 1
    return ordered[max(0, low)], ordered[min(n - 1, high)]


@dataclass
class _Timing:
    walls: list[float]
    devices: list[float]
    cpu_s: float  # this process's, over the steps
    others: float  # cores other processes used meanwhile
    slowed: float | None  # the fixed host work's median over the time it was sized to take

    def quiet(self, usable: int) -> bool:
        return quiet(self.others, self.cpu_s / max(1e-9, sum(self.walls)), usable, self.slowed)


class Stepped(Protocol):
    """What the step alone times: a trainer's step, the device's time for it, and an emulated
    trainer's fixed host work (its seconds in the last step, what it was sized to take; None for a
    real model). Every consumer is one, and so is calibrate's copy-and-step."""

    @property
    def last_device_s(self) -> float: ...

    @property
    def last_work_s(self) -> float | None: ...

    @property
    def work_sized_s(self) -> float | None: ...

    def step(self, x: Any, y: Any) -> float: ...


def _time(consumer: Stepped, x: object, y: object, min_steps: int, min_seconds: float) -> _Timing:
    walls: list[float] = []
    devices: list[float] = []
    works: list[float] = []
    host0 = host_cpu()
    t0, c0 = time.perf_counter(), time.process_time()
    while len(walls) < min_steps or time.perf_counter() - t0 < min_seconds:
        walls.append(consumer.step(x, y))
        devices.append(consumer.last_device_s)
        if consumer.last_work_s is not None:
            works.append(consumer.last_work_s)
    cpu = time.process_time() - c0
    host1 = host_cpu()
    span = host1.t - host0.t
    others = max(0.0, (host1.busy_s - host0.busy_s - cpu) / span) if span > 0 else 0.0
    sized = consumer.work_sized_s
    slowed = statistics.median(works) / sized if sized and works else None
    return _Timing(walls, devices, cpu, others, slowed)


def time_alone(
    consumer: Stepped,
    x: object,
    y: object,
    *,
    min_steps: int = 5,
    min_seconds: float = 1.0,
    attempts: int = ATTEMPTS,
    usable: int | None = None,
) -> StepAlone:
    """Median of at least ``min_steps`` steps and ``min_seconds`` after warm-up (a step of a
    millisecond counted out to a few hundred steps would span a tenth of a second, which a spell of
    the host's load covers whole), timed again while other processes disturb it (``attempts`` in
    all); the least disturbed kept."""
    warm, since = 0, time.perf_counter()
    while warm < WARMUP_STEPS or time.perf_counter() - since < WARMUP_S:
        consumer.step(x, y)
        warm += 1
    cores = usable or usable_cores()
    best: _Timing | None = None
    tries = 0
    for tries in range(1, attempts + 1):  # noqa: B007 (the count of tries is kept)
        timing = _time(consumer, x, y, min_steps, min_seconds)
        if best is None or _disturbance(timing, cores) < _disturbance(best, cores):
            best = timing
        if timing.quiet(cores):
            break
    assert best is not None
    on_gpu = getattr(getattr(consumer, "device", None), "type", None) == "cuda"  # a torch.device, if any
    spread = best.devices if on_gpu else best.walls
    mean = statistics.fmean(spread)
    low, high = median_interval(best.walls)
    return StepAlone(
        step_s=statistics.median(best.walls),
        fastest_s=min(best.walls),
        device_s=statistics.median(best.devices) if on_gpu else None,
        cpu_s=best.cpu_s / len(best.walls),
        steps=len(best.walls),
        cv=statistics.stdev(spread) / mean if len(spread) > 1 and mean > 0 else None,
        step_low_s=low,
        step_high_s=high,
        others_cores=best.others,
        quiet=best.quiet(cores),
        attempts=tries,
        slowed=best.slowed,
    )


def _disturbance(timing: _Timing, usable: int) -> tuple[bool, float, float]:
    """Which of two timings met the less disturbed host: a quiet one first, then the one others
    used fewer cores beside, then the one whose fixed work ran nearer its sized time."""
    return (not timing.quiet(usable), timing.others, timing.slowed or 0.0)
