"""The job's two ceilings, each measured inside the job right after its window (``--ceilings``):

- the step alone: the loop's own steps on its last real batches handed back from memory (no data
  wait): a batch over the median replayed step, after the first few and only those the loader's
  readers did not overlap (the batches its workers had been asked for are still made while the
  replay begins, on the cores the step needs), replayed until that median is known within 10 %
  (inject/_iobench_probe/loop.py); the median, as the step alone everywhere in iobench: a step of a
  millisecond that a busy host preempts once runs ten times as long, and a ceiling is what the step
  does when it runs;
- the loader alone: the job's own DataLoader drained with nothing consuming, timed after the
  batches its workers had queued: samples/s, and what bound it (its readers' time blocked against
  their CPU), which names it a ``fetch`` or a ``prep`` ceiling in a sweep's terms.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .steps import Step
from .workers import LoaderWork, loader_work

REPLAY_WARMUP = 3  # replayed steps left out: the first ones after the switch settle caches
QUIET_LEAST = 5  # the replayed steps the readers left alone that are enough to time the step on
TYPICAL = 1.5  # a step within this factor of the median step is a typical one


@dataclass(frozen=True)
class StepAloneRun:
    steps: int
    samples: int
    seconds: float
    period_s: float  # median step, from its next() to the next (the replayed batch's hand-over in it)
    step_s: float  # median host time of a step, its copies to the device apart (a step's compute_s)
    fastest_s: float
    # the process's CPU per median step: its share of a core over the steps near the median (within
    # TYPICAL of it), times the median step. A mean over every step carries a slow one's CPU, a ratio
    # over every step a preempted one's idle; one step's CPU alone may tick in milliseconds
    cpu_s: float | None
    device_s: float | None  # median device span of a step (CUDA events), None without
    note: str = ""  # what was left out of it, and why

    @property
    def samples_per_s(self) -> float:
        """A batch over the median step."""
        return self.samples / self.steps / self.period_s if self.period_s > 0 and self.steps else 0.0


@dataclass(frozen=True)
class LoaderAloneRun:
    batches: int
    samples: int
    seconds: float
    untimed: int  # batches the workers had queued, taken before the clock started
    ended: bool  # the epoch ran out before the time was up
    work: LoaderWork | None  # what its readers did meanwhile

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def part(self) -> Literal["prep", "fetch"]:
        """``fetch`` when its readers were mostly blocked, else ``prep``."""
        w = self.work
        if w is None:
            return "prep"
        return "fetch" if w.blocked_ms > w.cpu_ms + w.per_sample_ms(w.get_runq_s) + w.collate_ms else "prep"


def step_alone(
    replayed: list[Step],
    device: dict[int, float],
    copies: Callable[[Step], float],
    making: Sequence[tuple[float, float]] = (),
) -> StepAloneRun | None:
    """``copies(step)``: the seconds of host-to-device copies inside a step; ``making``: when the
    loader's readers were making batches (each batch's begin and end)."""
    settled = replayed[REPLAY_WARMUP:] if len(replayed) > REPLAY_WARMUP + 1 else replayed
    if not settled:
        return None
    quiet = [s for s in settled if not any(t0 < s.t_end and t1 > s.t_start for t0, t1 in making)]
    timed = quiet if len(quiet) >= QUIET_LEAST else settled
    left = len(settled) - len(timed)
    note = (
        f"{left} replayed step(s) left out: the loader's readers were still making batches during them"
        if left
        else ""
        if quiet is timed
        else "the loader's readers were making batches through most of the replay: the step alone may read low"
    )
    hosts = [s.host_s - copies(s) for s in timed]
    spans = [device[s.index] for s in timed if s.index in device]
    period = statistics.median(s.t_end - s.t_start for s in timed)
    cpu_known = [s for s in timed if s.cpu_s is not None]
    cpu_timed = [
        s for s in cpu_known if period / TYPICAL <= s.t_end - s.t_start <= period * TYPICAL
    ] or cpu_known
    cpu_wall = sum(s.t_end - s.t_start for s in cpu_timed)
    return StepAloneRun(
        steps=len(timed),
        samples=sum(s.samples for s in timed),
        seconds=timed[-1].t_end - timed[0].t_start,
        period_s=period,
        step_s=statistics.median(hosts),
        fastest_s=min(hosts),
        cpu_s=sum(s.cpu_s or 0.0 for s in cpu_timed) / cpu_wall * period if cpu_wall > 0 else None,
        device_s=statistics.median(spans) if spans else None,
        note=note,
    )


def loader_alone(record: Any, fetches: list[Any], readers: int) -> LoaderAloneRun | None:
    if record is None or record.t_from is None or record.batches < 1:
        return None
    seconds = record.t_end - record.t_from
    return LoaderAloneRun(
        batches=int(record.batches),
        samples=int(record.samples),
        seconds=seconds,
        untimed=int(record.untimed),
        ended=bool(record.ended),
        work=loader_work(fetches, record.t_from, record.t_end, readers),
    )
