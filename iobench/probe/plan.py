"""The probe's control of the job's window: when every rank has measured enough (the one window
rule, analysis/window.py: its steps, or its seconds when steps are slow), where the window ends in
each rank's step numbers with room for the ranks to learn it before they get there, and the phases
after it (the step alone, the loader alone, the stop) written to ``control.json`` for the hooks
(inject/_iobench_probe/control.py)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from iobench.analysis.window import met, warmup
from iobench.results.spec import MinMeasure

from .reader import Job
from .steps import Step, created_at, expected_ranks, loop_processes, main_stream, measured, stream_steps

# how far ahead of the ranks the window's end is set: the records reach the probe every 0.25 s or so
# and a rank reads the probe's answer at its next step, so ranks in step (DDP) all reach it later
NOTICE_S = 1.5
NOTICE_STEPS = 3
ALONE_S = 3.0  # the loader alone runs at least this long
ALONE_BATCHES = 10  # ... and takes at least this many batches
REPLAY_S = 2.0  # the step alone replays about this long at least
REPLAY_MAX_S = 15.0  # ... and on until its median step is known (one rank), at most this long


@dataclass(frozen=True)
class SoFar:
    warmup: int  # steps of warm-up
    steps: int  # measured after it
    seconds: float


@dataclass
class WindowPlan:
    """Where each rank's window ends (control.json), once set."""

    end: int
    streams: dict[str, dict] = field(default_factory=dict)
    warmup: dict[str, int] = field(default_factory=dict)  # per stream: the warm-up when the window closed


def durations(steps: list[Step], created: float | None) -> list[float]:
    """Each step's period, from the end of the one before (the first from the loader's creation,
    so start-up shows as a slow first step)."""
    ends = [s.t_end for s in steps]
    first = created if created is not None and created <= steps[0].t_start else steps[0].t_start
    return [b - a for a, b in zip([first, *ends[:-1]], ends, strict=True)]


def so_far(steps: list[Step], created: float | None) -> SoFar:
    if not steps:
        return SoFar(0, 0, 0.0)
    warm = min(warmup(durations(steps, created)).warmup_steps, len(steps) - 1)
    kept = steps[warm:]
    return SoFar(warm, len(kept), kept[-1].t_end - kept[0].t_start)


def end_step(current: list[int], steps: list[Step]) -> int:
    """The first step after the window, for ranks now at ``current`` steps: far enough ahead that
    every rank reads it before it gets there, at the window's own pace (its seconds over its steps:
    an epoch's opening counts, which a median step leaves out)."""
    seconds = steps[-1].t_end - steps[0].t_start if steps else 0.0
    period = seconds / len(steps) if steps and seconds > 0 else 0.0
    ahead = max(NOTICE_STEPS, math.ceil(NOTICE_S / period - 1e-9)) if period > 0 else NOTICE_STEPS
    return max(current) + ahead


REPLAY_MOST = 4000  # a step of half a millisecond replays 2 s in this many


def replay_steps(steps: list[Step], seconds: float = REPLAY_S, warm: int = 3) -> int:
    """Steps on replayed batches for the step alone: ``warm`` first, then about ``seconds``."""
    host = statistics.median(s.host_s for s in steps) if steps else 0.1
    return warm + max(5, min(REPLAY_MOST, math.ceil(seconds / host - 1e-9) if host > 0 else REPLAY_MOST))


def window_plan(job: Job, least: MinMeasure, ceilings: bool) -> WindowPlan | None:
    """The plan once every rank has measured enough, else None."""
    pids = loop_processes(job)
    if not pids or len(pids) < expected_ranks(job):
        return None
    tags = [t for pid in pids if (t := main_stream(job, pid)) is not None]
    progress, warm = [], {}
    for tag in tags:
        steps = measured(stream_steps(job, tag))
        if not steps:
            return None
        state = so_far(steps, created_at(job, tag))
        if not met(least, state.steps, state.seconds):
            return None
        progress.append(steps[state.warmup :])
        warm[tag] = state.warmup
    first = progress[0]
    end = end_step([len(job.steps[t]) for t in tags], first)
    replay = replay_steps(first) if ceilings else 0
    in_step = len(tags) > 1
    # ranks in step drain as many batches each: what the slowest took in ALONE_S at its window's pace
    pace = min(len(steps) / max(1e-9, steps[-1].t_end - steps[0].t_start) for steps in progress)
    plan = {
        "end": end,
        "replay": replay,
        # ranks in step replay as many steps each; one rank on until its median step is known
        "replay_max_s": REPLAY_MAX_S if ceilings and not in_step else 0.0,
        "replay_min_s": REPLAY_S if ceilings and not in_step else 0.0,
        "alone_s": ALONE_S if ceilings else 0.0,
        "alone_batches": max(ALONE_BATCHES, math.ceil(ALONE_S * pace)) if ceilings and in_step else 0,
        # ranks in step leave together: as far past the phases as the window's end is past the ranks (a
        # rank that learnt the plan late has done its phases by then); one rank stops right after them
        "stop": (end + replay + 1 + (end - max(len(job.steps[t]) for t in tags)) if in_step else 0)
        if ceilings
        else end,
    }
    return WindowPlan(end=end, streams={tag: plan for tag in tags}, warmup=warm)


def phases_done(job: Job, plan: WindowPlan, ceilings: bool) -> bool:
    """Every planned stream got past its window (and its ceilings, each run or left out)."""
    for tag, p in plan.streams.items():
        if tag in job.stops:
            continue
        if ceilings and tag not in job.alone and tag not in job.skips:
            return False
        if not ceilings and len(job.steps.get(tag, [])) < p["end"]:
            return False
    return True
