"""A stream's steps as the loop took them: each from its next() call (``t_start``) through the batch
in hand (``t_return``) to the loop's next call on the stream (``t_end``: the step's own work, the
copy to the device included, lies between the last two). A step's end is only known once the loop
has asked again, so the last step recorded is not yet a step.

The rank of a process is torchrun's ``RANK`` where it set one; a process's main stream is the one
that handed its loop the most batches (the training loader, beside an evaluation loader).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from .inject._iobench_probe.records import PHASE_MEASURED, PHASE_REPLAYED
from .reader import Job


@dataclass(frozen=True)
class Step:
    index: int  # the stream's batch number (every phase)
    epoch: int
    t_start: float  # the loop began waiting: its next() call, or for an epoch's first step its iter()
    t_return: float  # the batch in hand
    t_end: float  # the loop's next call on the stream
    samples: int
    phase: int
    cpu_s: float | None  # the process's CPU from this call to the next (None: the epoch ended there)
    # of the wait, the epoch's opening: from its iter() until every worker of it had begun its first
    # batch (the iterator built, its workers started: spawned ones import the job's modules first)
    open_s: float = 0.0

    @property
    def wait_s(self) -> float:
        return self.t_return - self.t_start

    @property
    def host_s(self) -> float:
        """The loop's time with the batch in hand: its step, the copy to the device included."""
        return self.t_end - self.t_return


def openings(job: Job, tag: str) -> list[tuple[float, float]]:
    """Each epoch's opening: from its iter() to when the last of its workers began its first batch
    (at least the iter() itself)."""
    opened = sorted(job.epochs.get(tag, []), key=lambda e: e.t)
    begins = sorted(((f.t0, f.worker) for f in job.fetches.get(tag, []) if f.worker >= 0), key=lambda b: b[0])
    out = []
    for i, e in enumerate(opened):
        until = opened[i + 1].t if i + 1 < len(opened) else float("inf")
        first: dict[int, float] = {}
        for t0, worker in begins[bisect.bisect_left(begins, (e.t, -1)) :]:
            if t0 >= until:
                break
            first.setdefault(worker, t0)
        out.append((e.t, max([e.t_ready, *first.values()])))
    return out


def stream_steps(job: Job, tag: str) -> list[Step]:
    """The complete steps of one stream, in order."""
    raw = job.steps.get(tag, [])
    ends = sorted(e.t_call for e in job.ends.get(tag, []))
    opened = sorted(job.epochs.get(tag, []), key=lambda e: e.t)
    starts = [e.t for e in opened]
    opening = openings(job, tag)
    out: list[Step] = []
    for i, s in enumerate(raw):
        following = raw[i + 1] if i + 1 < len(raw) else None
        # the loop's next call: the next step's, or an epoch's end if one came first
        k = bisect.bisect_right(ends, s.t_return)
        end_call = ends[k] if k < len(ends) else None
        if following is not None and (end_call is None or following.t_call <= end_call):
            t_end, cpu = following.t_call, following.cpu_call - s.cpu_call
        elif end_call is not None:
            t_end, cpu = end_call, None
        else:
            break  # the last step recorded: not finished yet
        # epochs: a DataLoader's by its iterators, a DALI iterator's (which resets itself) by its ends
        n_opened = bisect.bisect_right(starts, s.t_call)
        epoch = max(0, n_opened - 1, bisect.bisect_right(ends, s.t_call))
        t_start = s.t_call
        if n_opened and (not out or opened[n_opened - 1].t >= out[-1].t_end):  # the epoch's first step
            t_start = opened[n_opened - 1].t
        # the part of the wait inside the epoch's opening (its first steps wait for the workers' start)
        begin, end = opening[n_opened - 1] if n_opened else (0.0, 0.0)
        open_s = max(0.0, min(s.t_return, end) - max(t_start, begin))
        out.append(Step(i, epoch, t_start, s.t_return, t_end, int(s.samples), int(s.phase), cpu, open_s))
    return out


def measured(steps: list[Step]) -> list[Step]:
    """The steps taken on real batches before the probe's phases."""
    out = []
    for s in steps:
        if s.phase != PHASE_MEASURED:
            break
        out.append(s)
    return out


def replayed_steps(steps: list[Step]) -> list[Step]:
    return [s for s in steps if s.phase == PHASE_REPLAYED]


def created_at(job: Job, tag: str) -> float | None:
    """When the stream's first iterator was asked for (its workers start then)."""
    epochs = job.epochs.get(tag)
    return min(e.t for e in epochs) if epochs else None


def main_stream(job: Job, pid: int) -> str | None:
    tags = [t for t in job.steps if Job.pid_of(t) == pid]
    return max(tags, key=lambda t: len(job.steps[t]), default=None)


def loop_processes(job: Job) -> list[int]:
    """The processes whose loop took batches, by rank."""
    pids = {Job.pid_of(t) for t, steps in job.steps.items() if steps}
    return sorted(pids, key=lambda pid: (rank_of(job, pid), pid))


def rank_of(job: Job, pid: int) -> int:
    hello: Any = job.hellos.get(pid)
    try:
        return int(hello.ranks.get("RANK", 0)) if hello is not None else 0
    except (TypeError, ValueError):
        return 0


def expected_ranks(job: Job) -> int:
    """The ranks torchrun said there would be (1 without it)."""
    sizes = []
    for hello in job.hellos.values():
        try:
            sizes.append(int(hello.ranks.get("WORLD_SIZE", 1)))
        except (TypeError, ValueError):
            continue
    return max(sizes, default=1)
