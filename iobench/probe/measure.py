"""Each rank's measurement, gathered from the job's records: its main stream's steps up to the end of
the window (warm-up marked), what the copies to the device, the device and the readers did in each
step and over the window, and the two ceilings measured after it. Raw figures in the probe's own
terms; iobench/probe/publish.py turns them into a run directory."""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iobench.analysis.window import warmup

from .batches import match
from .ceilings import LoaderAloneRun, StepAloneRun, loader_alone, step_alone
from .plan import durations
from .reader import Job
from .steps import Step, created_at, loop_processes, main_stream, measured, rank_of, replayed, stream_steps
from .workers import LoaderWork, loader_work


@dataclass(frozen=True)
class ProbedRank:
    pid: int
    rank: int
    ranks: dict  # torchrun's variables in the process (RANK, LOCAL_RANK, WORLD_SIZE, ...)
    tag: str
    info: dict  # the loader (loop.loader_info)
    created: float  # the stream's first iterator asked for
    steps: list[Step]  # its steps on real batches up to the window's end
    warmup: int
    warmup_method: str
    h2d_s: list[float]  # per step: host-to-device copies inside it
    # per step: the batch's making, as its reader recorded it (batches.py), or None where unmatched
    batches: list[Any]
    # per step: what the readers' read calls returned for its batch (unmatched: in the step's time)
    bytes_read: list[int]
    device_s: dict[int, float]  # per step index: the device's span (CUDA events)
    work: LoaderWork | None  # the readers over the window
    pin_ms_per_batch: float | None
    h2d_bytes: int  # over the window
    device_read_bytes: int  # the readers', the whole run
    step_alone: StepAloneRun | None
    loader_alone: LoaderAloneRun | None
    stopped: bool  # the probe ended the job after this rank's window
    skipped: str | None = None  # why the loader alone was left out (its epochs too short), if it was

    @property
    def window(self) -> list[Step]:
        return self.steps[self.warmup :]

    @property
    def workers(self) -> int:
        return int(self.info.get("workers") or 0)

    def feed(self) -> tuple[float, str] | None:
        """Samples/s the job's step takes with its data in hand, and what that rate is: its step
        alone (--ceilings), else its own steps' host time in the window."""
        if self.step_alone is not None and self.step_alone.samples_per_s > 0:
            return self.step_alone.samples_per_s, "the job's step alone"
        host = [s.host_s for s in self.window if s.host_s > 0]
        if not host:
            return None
        rate = statistics.fmean(s.samples for s in self.window) / statistics.median(host)
        return rate, "the job's step with its data in hand"


def _within(records: list[Any], start: float, end: float, at: str = "t0") -> list[Any]:
    times = [getattr(r, at) for r in records]
    return records[bisect.bisect_left(times, start) : bisect.bisect_left(times, end)]


def rank_run(job: Job, pid: int, end_step: int | None, warmup_steps: int | None = None) -> ProbedRank | None:
    """One rank's run, its window ending at ``end_step`` after ``warmup_steps`` (None: the warm-up
    read off its steps, as when the window closed; both None: the job ended first)."""
    tag = main_stream(job, pid)
    if tag is None:
        return None
    every = stream_steps(job, tag)
    steps = measured(every)
    if end_step is not None:
        steps = steps[:end_step]
    if not steps:
        return None
    created = created_at(job, tag)
    state = warmup(durations(steps, created))
    found = state.warmup_steps if warmup_steps is None else warmup_steps
    warm = min(found, len(steps) - 1)
    copies = sorted(job.h2d.get(pid, []), key=lambda r: r.t0)
    fetches = sorted(job.fetches.get(tag, []), key=lambda r: r.t1)
    h2d = [sum(c.t1 - c.t0 for c in _within(copies, s.t_return, s.t_end)) for s in steps]
    window = steps[warm:]
    start, end = window[0].t_start, window[-1].t_end
    info = job.loaders[tag].info if tag in job.loaders else {}
    workers = int(info.get("workers") or 0)
    readers = max(1, workers)
    made = match(steps, fetches, [e.t for e in job.epochs.get(tag, [])], workers, bool(info.get("iterable")))
    reads = [
        int(f.rchar)
        if f is not None
        else sum(int(x.rchar) for x in _within(fetches, s.t_start, s.t_end, "t1"))
        for s, f in zip(steps, made, strict=True)
    ]
    pins = _within(sorted(job.pins.get(pid, []), key=lambda r: r.t0), start, end)
    hello = job.hellos.get(pid)
    return ProbedRank(
        pid=pid,
        rank=rank_of(job, pid),
        ranks=dict(hello.ranks) if hello is not None else {},
        tag=tag,
        info=info,
        created=created if created is not None else steps[0].t_start,
        steps=steps,
        warmup=warm,
        warmup_method=state.method,
        h2d_s=h2d,
        batches=made,
        bytes_read=reads,
        device_s=job.device.get(tag, {}),
        work=loader_work(fetches, start, end, readers),
        pin_ms_per_batch=1000.0 * sum(p.t1 - p.t0 for p in pins) / len(pins) if pins else None,
        h2d_bytes=sum(int(c.bytes) for c in _within(copies, start, end)),
        device_read_bytes=sum(int(f.read_bytes) for f in fetches),
        step_alone=step_alone(
            replayed(every),
            job.device.get(tag, {}),
            _copies_per_step(copies),
            [(f.t0, f.t1) for f in fetches],
        ),
        loader_alone=loader_alone(job.alone.get(tag), fetches, readers),
        stopped=tag in job.stops,
        skipped=job.skips[tag].why if tag in job.skips else None,
    )


def _copies_per_step(copies: list[Any]) -> Callable[[Step], float]:
    def inside(step: Step) -> float:
        return sum(c.t1 - c.t0 for c in _within(copies, step.t_return, step.t_end))

    return inside


def rank_runs(job: Job, end_step: int | None, warmups: dict[str, int]) -> list[ProbedRank]:
    """Every rank that took batches, by rank; ``warmups`` the warm-up of each stream as the window
    closed (MSER on the series then: a later disturbance must not move a window already measured)."""
    out = []
    for pid in loop_processes(job):
        tag = main_stream(job, pid)
        run = rank_run(job, pid, end_step, warmups.get(tag) if tag else None)
        if run is not None:
            out.append(run)
    return out
