"""What ``iobench probe`` tells the job's processes, through ``<dir>/control.json`` (written whole and
renamed into place): for each stream, the step at which its measured window ends, how many steps the
loop then takes on replayed batches and how long the loader runs alone; what happens after (stop
the job or let it go on unmeasured); ``off``: stop recording everywhere, workers included.

Read at most every ``CHECK_S`` seconds (a stat), from the hooks that run anyway, so the probe adds
no thread to the job.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .records import CONTROL_NAME

CHECK_S = 0.1


@dataclass(frozen=True)
class ControlPlan:
    end: int  # the first step after the measured window
    replay: int  # steps on batches replayed from memory (the step alone); 0: none
    alone_s: float  # seconds of the loader alone after them; 0: none
    # the step at which the job stops, the same for every rank (a rank that learnt the plan late has
    # done its phases by then: ranks in step must leave together); 0: right after the phases
    stop: int = 0
    # where ranks run in step: the loader alone drains this many batches on every rank, not a time
    # (every rank's epoch must keep as many batches as the others'); 0: for alone_s seconds
    alone_batches: int = 0
    # the step alone replays at least ``replay`` steps and ``replay_min_s`` seconds, then on until its
    # median step is known within REPLAY_PRECISION, for at most ``replay_max_s`` seconds; 0: exactly
    # ``replay`` steps (ranks in step must take as many)
    replay_max_s: float = 0.0
    replay_min_s: float = 0.0


class Control:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, CONTROL_NAME)
        self.plans: dict[str, ControlPlan] = {}
        self.then = "stop"
        self.off = False
        self._checked = -1.0
        self._seen: tuple[int, int] | None = None

    def poll(self, now: float) -> None:
        if now - self._checked < CHECK_S:
            return
        self._checked = now
        try:
            st = os.stat(self.path)
        except OSError:
            return
        seen = (st.st_ino, st.st_mtime_ns)
        if seen == self._seen:
            return
        try:
            with open(self.path) as f:
                raw = json.load(f)
        except (OSError, ValueError):
            return  # replaced while read: the next poll reads the new one
        self._seen = seen
        self.plans = {tag: ControlPlan(**plan) for tag, plan in raw.get("streams", {}).items()}
        self.then = raw.get("then", "stop")
        self.off = bool(raw.get("off", False))
