"""When the probe has measured enough: the warm-up read off the loop's own step series as a sweep
reads it (iobench.analysis.window: the start-up step, then MSER), then a window of at least
``steps`` steps, or of ``seconds`` seconds when steps are slow; and where the window ends in each
rank's step numbers, with room for the ranks to learn it before they get there."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from iobench.analysis.window import warmup

from .steps import Step

# the least a window has, however its limits are set: MSER needs a series to read, and a few
# seconds say more than a handful of fast steps
LEAST_STEPS = 10
LEAST_SECONDS = 5.0
# how far ahead of the ranks the window's end is set: the records reach the probe every 0.2 s or so
# and a rank reads the probe's answer at its next step, so ranks in step (DDP) all reach it later
NOTICE_S = 1.5
NOTICE_STEPS = 3


@dataclass(frozen=True)
class Limits:
    steps: int = 50
    seconds: float = 30.0

    def done(self, steps: int, seconds: float) -> bool:
        """Enough: the steps over a few seconds, or the seconds over a few steps."""
        return (steps >= self.steps and seconds >= min(LEAST_SECONDS, self.seconds)) or (
            seconds >= self.seconds and steps >= min(LEAST_STEPS, self.steps)
        )


@dataclass(frozen=True)
class SoFar:
    warmup: int  # steps of warm-up
    steps: int  # measured after it
    seconds: float


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
    every rank reads it before it gets there."""
    period = statistics.median(s.t_end - s.t_start for s in steps) if steps else 1.0
    ahead = max(NOTICE_STEPS, math.ceil(NOTICE_S / period - 1e-9)) if period > 0 else NOTICE_STEPS
    return max(current) + ahead


def replay_steps(steps: list[Step], seconds: float = 2.0, warm: int = 3) -> int:
    """Steps on replayed batches for the step alone: ``warm`` first, then about ``seconds``."""
    host = statistics.median(s.host_s for s in steps) if steps else 0.1
    return warm + max(5, min(400, math.ceil(seconds / host - 1e-9) if host > 0 else 400))
