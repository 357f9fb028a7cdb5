"""Live figures of a running cell, for the sweep's progress display.

The cell runs in a process of its own, so it reports through a small JSON file that the sweep
names in IOBENCH_LIVE_FILE and polls: replaced about twice a second from the step loop's on_step
callback, never torn. Without the variable (a cell run by hand) nothing is written.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from iobench.cell.protocol import LIVE_ENV
from iobench.results.figures import StepRow

INTERVAL_S = 0.5


class LiveFile:
    """Counts one measured run's steps and publishes samples/s and stall fraction so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run = 0
        self.first: StepRow | None = None
        self.samples = 0
        self.wait_s = 0.0
        self.last_write = 0.0
        self.checkpoint_s = 0.0  # a checkpoint cell: the loop's seconds blocked saving
        self.checkpoint_bytes = 0  # ... and the bytes its saves committed

    def start_run(self) -> None:
        """A new measured run (repeat or capacity check): its figures start from zero."""
        self.run += 1
        self.first, self.samples, self.wait_s = None, 0, 0.0
        self.checkpoint_s, self.checkpoint_bytes = 0.0, 0
        self._write({"run": self.run, "steps": 0, "samples": 0})

    def pause(self, what: str) -> None:
        """No batch is due until the next measured run starts (the tier is being prepared, results
        written): the sweep's watchdog (iobench/sweep/watchdog.py) does not count this time."""
        self._write({"run": self.run, "steps": None, "paused": what})

    def on_checkpoint(self, nbytes: int) -> None:
        """A save committed ``nbytes`` (the next step's write publishes it)."""
        self.checkpoint_bytes += nbytes

    def on_step(self, row: StepRow) -> None:
        self.checkpoint_s += row.checkpoint_s
        if self.first is None:
            # the first step carries worker start-up: rates are taken from its end on
            self.first = row
            return
        self.samples += row.samples
        self.wait_s += row.wait_s
        now = time.monotonic()
        if now - self.last_write < INTERVAL_S:
            return
        span = row.t_end - self.first.t_end
        self._write(
            {
                "run": self.run,
                "steps": row.step + 1,
                "samples": self.samples + self.first.samples,
                "samples_per_s": self.samples / span if span > 0 else None,
                "stall_fraction": self.wait_s / span if span > 0 else None,
                "checkpoint_blocked_s": self.checkpoint_s,
                "checkpoint_bytes_per_s": self.checkpoint_bytes / span if span > 0 else None,
            }
        )

    def _write(self, figures: dict) -> None:
        self.last_write = time.monotonic()
        # not iobench.atomic.atomic_write: that fsyncs, and a benchmark must not add two disk
        # flushes a second to what it measures; a lost update of live figures costs nothing
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(figures))
        os.replace(tmp, self.path)


_live: LiveFile | None = None


def live_file() -> LiveFile | None:
    """This process's live file, when a sweep asked for one."""
    global _live
    if _live is None and os.environ.get(LIVE_ENV):
        _live = LiveFile(Path(os.environ[LIVE_ENV]))
    return _live


def read_live(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
