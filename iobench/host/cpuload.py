"""How busy the host's cores were, whoever kept them busy: the kernel's CPU counters (/proc/stat)
and a process's own, read at two instants and turned into cores' worth of CPU over the span
between (docs/method.md, The core budget)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

# a trainer timed alone met a quiet host: other processes used less than this many cores, or left it
# at least SPARE_CORES beyond what it used itself
QUIET_OTHERS = 0.5
SPARE_CORES = 2.0
# and an emulated trainer's fixed work ran under this many times its sized time: above it, something
# the counters miss slowed the cores (on a quiet host its median ran at 0.96-1.05 of the sized
# time; during one spell of another guest's work, 1.48)
SLOWED = 1.15


def quiet(others: float, used: float, usable: int, slowed: float | None = None) -> bool:
    """Whether other processes' ``others`` cores left a trainer using ``used`` of ``usable`` alone,
    and its fixed work, where it has one, ran near its sized time (``slowed``: the ratio)."""
    unhindered = slowed is None or slowed < SLOWED
    return unhindered and (others < QUIET_OTHERS or usable - others - used >= SPARE_CORES)


@dataclass(frozen=True)
class HostCpu:
    """The host's cumulative CPU seconds, every core together, at ``t`` (perf_counter)."""

    t: float
    busy_s: float  # on a core: user, nice, system, interrupts (a guest's time is in user)
    steal_s: float | None  # taken by the hypervisor; None where the kernel does not report it


def host_cpu() -> HostCpu:
    times = psutil.cpu_times()
    busy = (
        times.user + times.nice + times.system + getattr(times, "irq", 0.0) + getattr(times, "softirq", 0.0)
    )
    return HostCpu(time.perf_counter(), busy, getattr(times, "steal", None))


def process_cpu_s(pid: int) -> float | None:
    """A process's own CPU seconds (its threads, not its children); None where it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    return times.user + times.system


@dataclass(frozen=True)
class HostLoad:
    """Cores' worth of CPU over a span (CPU seconds over its seconds), the input of a window's core
    budget: the host's busy CPU, the job's process tree's, iobench's own outside that tree (the sweep,
    the probe) and inside it (a telemetry thread in the trainer's process), and what was stolen."""

    usable: int
    seconds: float
    busy: float | None
    job: float | None
    own_outside: float = 0.0
    own_inside: float = 0.0
    steal: float | None = None


@dataclass(frozen=True)
class CpuSample:
    """One reading of the counters a core budget needs, each cumulative CPU seconds."""

    host: HostCpu
    job_s: float | None  # the job's process tree; None where not readable
    own_outside_s: float = 0.0  # iobench's own processes outside the job's tree (the sweep, the probe)
    own_inside_s: float = 0.0  # iobench's own threads inside it (a telemetry thread)


def load_over(samples: Sequence[CpuSample], start: float, end: float, usable: int) -> HostLoad | None:
    """The host's load over [start, end] (perf_counter), from the samples that bracket it: the last
    at or before ``start`` and the first at or after ``end`` (the nearest inside where the sampling
    began late or stopped early)."""
    if not samples:
        return None
    before = [s for s in samples if s.host.t <= start] or list(samples[:1])
    after = [s for s in samples if s.host.t >= end] or list(samples[-1:])
    a, b = before[-1], after[0]
    span = b.host.t - a.host.t
    if span <= 0:
        return HostLoad(usable, 0.0, None, None)
    steal = (
        (b.host.steal_s - a.host.steal_s) / span
        if a.host.steal_s is not None and b.host.steal_s is not None
        else None
    )
    return HostLoad(
        usable=usable,
        seconds=span,
        busy=(b.host.busy_s - a.host.busy_s) / span,
        job=(b.job_s - a.job_s) / span if a.job_s is not None and b.job_s is not None else None,
        own_outside=(b.own_outside_s - a.own_outside_s) / span,
        own_inside=(b.own_inside_s - a.own_inside_s) / span,
        steal=steal,
    )
