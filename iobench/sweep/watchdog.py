"""The sweep's watchdog over a running cell: no batch for ``run.stall_timeout`` seconds fails it.

It reads what the cell already publishes, its live figures file (iobench/cell/live.py: the
measured run and the steps so far, rewritten about twice a second while batches arrive), and adds
nothing to the step loop. It arms when a measured run starts (before that the cell prepares the
tier, whose own deadline bounds every request; the cell marks those stretches "paused") and fires
when (run, steps) has not changed for ``stall_timeout`` seconds. Its message names the tier, where its data lives, the last batch and
when it came, and what the cell's processes are doing (one blocked in the kernel points at the
storage: a FUSE mount, a disk).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from iobench.results.spec import CellSpec
from iobench.tiers.faults import tier_location


@dataclass
class StallWatch:
    """The running cell's last batch, as its live figures report it."""

    limit_s: float
    key: tuple | None = None  # (measured run, steps) last seen
    since: float = 0.0  # monotonic time it was first seen
    since_wall: float = 0.0  # its wall-clock time (the live file's mtime)
    figures: dict = field(default_factory=dict)

    def see(self, figures: dict | None, mtime: float | None, now: float | None = None) -> None:
        if not figures:
            return
        if figures.get("paused"):  # between measured runs: no batch is due until the next starts
            self.key = None
            return
        key = (figures.get("run"), figures.get("steps"))
        if key != self.key:
            self.key, self.figures = key, figures
            self.since = time.monotonic() if now is None else now
            self.since_wall = mtime or time.time()

    def stalled_for(self, now: float | None = None) -> float | None:
        """Seconds without a new batch, once armed and past the limit; else None."""
        if self.key is None:
            return None
        quiet = (time.monotonic() if now is None else now) - self.since
        return quiet if quiet >= self.limit_s else None

    def message(self, cell: CellSpec, quiet_s: float, processes: str) -> str:
        run, steps = self.key or (None, None)
        at = dt.datetime.fromtimestamp(self.since_wall, dt.timezone.utc).strftime("%H:%M:%S UTC")
        last = (
            f"the step loop of measured run {run} began at {at} and no batch has come since"
            if not steps
            else f"the last batch (step {steps} of measured run {run}) came at {at}"
        )
        cause = (
            f"stalled: no batch for {quiet_s:.0f} s (run.stall_timeout={self.limit_s:g} s): {last}; "
            f"tier {cell.tier_name!r} ({cell.tier_kind}): {tier_location(cell.tier)}"
            + (f"; {processes}" if processes else "")
        )
        hint = (
            "hint: the storage stopped delivering (a daemon down or hung: `iobench lab status`, the "
            "cluster's `ceph health`) or the loader hangs, not a credentials problem; the cell's log "
            "(cell.log) has its output; raise run.stall_timeout if batches legitimately take longer"
        )
        return f"{cause}\n{hint}"


def group_processes(pgid: int) -> list[dict]:
    """The processes of the process group ``pgid`` (a cell and its workers): pid, state, wchan, name."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 3 or int(fields[2]) != pgid:
            continue
        try:
            wchan = Path(entry.path, "wchan").read_text().strip()
        except OSError:
            wchan = ""
        out.append({"pid": int(entry.name), "state": fields[0], "wchan": wchan, "name": name})
    return out


def describe_processes(pgid: int) -> str:
    """One clause on the group's processes: how many, and those blocked in the kernel (state D)."""
    procs = [p for p in group_processes(pgid) if p["state"] not in ("Z", "X")]
    if not procs:
        return ""
    blocked = [p for p in procs if p["state"] == "D"]
    if not blocked:
        return f"its {len(procs)} process(es) are not blocked in the kernel"
    where = ", ".join(sorted({p["wchan"] or "?" for p in blocked}))
    return (
        f"{len(blocked)} of its {len(procs)} process(es) blocked in the kernel (state D in {where}: "
        "waiting for a file system or device)"
    )


def process_table(pgid: int) -> str:
    """The group's processes, one line each, for the cell's log."""
    return "\n".join(
        f"  pid {p['pid']:<8} {p['state']}  {p['wchan'] or '-':<28} {p['name']}"
        for p in group_processes(pgid)
    )
