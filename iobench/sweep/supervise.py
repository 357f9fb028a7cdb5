"""Supervising a cell's process: start it in a process group of its own, watch it until it exits or
must be stopped (run.timeout_s, the stall watchdog, a cell that published its result but does not
exit), then kill the whole group and clean what a killed cell leaves in its tier's cache.

What the cell's end means (its summary, its error, its log) is judged in outcome.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from iobench.cell.live import read_live
from iobench.cell.protocol import cell_environment
from iobench.results.spec import CellSpec
from iobench.sweep.rundir import LIVE_NAME
from iobench.sweep.watchdog import StallWatch, describe_processes, group_processes, process_table
from iobench.tiers.cachebooks import remove_partials
from iobench.tiers.faults import tier_location

POLL_S = 0.5
KILL_GRACE_S = 5.0
EXIT_GRACE_S = 10.0  # a cell that published its result and still runs after this is killed
OOM_SCORE_ADJ = 500  # above the sweep's own score
# cell processes that did not exit even after SIGKILL (a system call blocked in the kernel, e.g. a
# read on a FUSE mount whose daemon waits for a dead OSD): reaped once they do
_UNREAPED: list[subprocess.Popen] = []


@dataclass(frozen=True)
class RunningCellPaths:
    """A running cell's files: its spec, output and live figures in its scratch directory (which
    also collects its ranks' errors), and the summary it publishes in the run directory."""

    scratch: Path
    summary: Path

    @property
    def spec(self) -> Path:
        return self.scratch / "cell.json"

    @property
    def stderr(self) -> Path:
        return self.scratch / "stderr.log"

    @property
    def live(self) -> Path:
        return self.scratch / LIVE_NAME


@dataclass(frozen=True)
class Ended:
    """How a cell's process ended: its exit status (None: it outlived SIGKILL), the error when the
    sweep stopped it (a time-out, a stall), and what the sweep saw, for the cell's log."""

    returncode: int | None
    stopped: str | None
    notes: list[str]


def supervise(
    command: list[str],
    cell: CellSpec,
    files: RunningCellPaths,
    *,
    timeout_s: float,
    started: float,
    on_live: Callable[[dict | None, float], None],
) -> Ended:
    """Run ``command`` for ``cell`` until it ends or is stopped; its processes are gone on return,
    and on an exception (a stop signal) too. ``started``: the wall-clock time of the attempt, which
    tells this attempt's summary from an earlier one's."""
    notes: list[str] = []
    proc = None
    try:
        proc = _start(command, files)
        stopped, why = _watch(proc, cell, files, timeout_s=timeout_s, started=started, on_live=on_live)
        if why:
            notes.append(why)
    finally:
        if proc is not None and (left := _kill_group(proc)):
            notes.append(left)
        if removed := remove_partials(cell.tier):
            notes.append(removed)
    return Ended(proc.returncode, stopped, notes)


def _start(command: list[str], files: RunningCellPaths) -> subprocess.Popen:
    with open(files.stderr, "w") as stderr:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                # `python -m` would put the working directory first on the cell's (and its
                # ranks') import path: a user's own loaders/ or iobench/ package there would
                # stand in for ours. Python >= 3.11 leaves it off; 3.10 ignores the variable
                "PYTHONSAFEPATH": "1",
                **cell_environment(files.live, files.scratch),
            },
            # a process group of its own: killed as a whole, and spared the terminal's Ctrl-C,
            # which the sweep handles
            start_new_session=True,
        )
    _first_to_go(proc.pid)
    return proc


def _watch(
    proc: subprocess.Popen,
    cell: CellSpec,
    files: RunningCellPaths,
    *,
    timeout_s: float,
    started: float,
    on_live: Callable[[dict | None, float], None],
) -> tuple[str | None, str | None]:
    """Poll until the cell exits or must be stopped: (the error that stops it, the sweep's note on
    why it stopped it), each None when it did not."""
    watch = StallWatch(cell.run.stall_timeout)
    t0 = time.monotonic()
    landed: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        elapsed = now - t0
        if elapsed > timeout_s:
            return (
                f"cell did not finish within run.timeout_s={timeout_s} s; tier {cell.tier_name!r}: "
                f"{tier_location(cell.tier)}; {describe_processes(proc.pid) or 'no process left'}\n"
                "hint: raise run.timeout_s for a longer cell, or see the cell's log (cell.log)",
                f"run.timeout_s: killed after {elapsed:.1f} s",
            )
        figures = read_live(files.live)
        on_live(figures, elapsed)
        watch.see(figures, _mtime(files.live), now)
        quiet = watch.stalled_for(now)
        if quiet is not None:
            return (
                watch.message(cell, quiet, describe_processes(proc.pid)),
                f"watchdog: no batch for {quiet:.1f} s\n{process_table(proc.pid)}",
            )
        if landed is None and (_mtime(files.summary) or 0) >= started:
            landed = now
        if landed is not None and now - landed > EXIT_GRACE_S:
            return None, f"the cell published its result but had not exited {EXIT_GRACE_S:g} s later"
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(POLL_S)
    return None, None


def _first_to_go(pid: int) -> None:
    """The cell (and the workers and ranks it starts, which inherit it) before the sweep, when the
    kernel must kill a process for memory: the sweep survives to record the cell as failed, say why,
    and go on. Raising a score needs no privilege; the cell has not forked yet (it is importing)."""
    with contextlib.suppress(OSError, ValueError):
        own = int(Path("/proc/self/oom_score_adj").read_text())
        Path(f"/proc/{pid}/oom_score_adj").write_text(str(min(1000, max(OOM_SCORE_ADJ, own + OOM_SCORE_ADJ))))


def _kill_group(proc: subprocess.Popen) -> str | None:
    """The cell and everything it started (loader workers, ceiling readers) leave no orphans.

    Never waits for good: a process blocked in the kernel (state D: a FUSE read whose daemon waits
    for a dead OSD) survives SIGKILL until that call returns. Returns what was left, or None."""
    _reap()
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(KILL_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_GRACE_S
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(KILL_GRACE_S)
    while time.monotonic() < deadline and any(
        p["state"] not in ("Z", "X") for p in group_processes(proc.pid)
    ):
        time.sleep(0.1)
    left = [p for p in group_processes(proc.pid) if p["state"] not in ("Z", "X")]
    if proc.poll() is None:
        _UNREAPED.append(proc)
    if not left:
        return None
    return (
        f"{len(left)} process(es) of the cell outlived SIGKILL, blocked in the kernel; they exit when "
        f"the call they wait in returns (the storage answers):\n{process_table(proc.pid)}"
    )


def _reap() -> None:
    for proc in list(_UNREAPED):
        if proc.poll() is not None:
            _UNREAPED.remove(proc)


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None
