"""What a sweep keeps in its run directory so that it can be left running, killed and resumed.

    RUN_DIR/sweep.yaml        the sweep file as run (after --set and the command's flags), at start
    RUN_DIR/cells.json        the planned cells, resolved: what --resume compares the new plan with
    RUN_DIR/sweep-state.json  the cell running now (written before it starts) and every attempt

A cell's own directory appears in one rename (results/store.py), so after a kill the run holds
each cell complete or not at all; the ``running`` entry says which cell the kill interrupted.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from iobench.host.atomic import atomic_write, atomic_write_json
from iobench.results.codec import RecordError, from_json, to_json
from iobench.results.spec import CellSpec
from iobench.results.store import publish_cell, read_summary
from iobench.results.summary import CellSummary

SWEEP_FILE = "sweep.yaml"
CELLS_FILE = "cells.json"
STATE_FILE = "sweep-state.json"
SCRATCH_PREFIX = ".attempt-"  # a running cell's spec, stderr and live figures
LIVE_NAME = "live.json"  # in a running cell's scratch directory: its live figures (iobench/cell/live.py)


def scratch_dir(run_dir: Path, cell_id: str) -> Path:
    """Where a running cell's spec, stderr and live figures are kept until it ends."""
    return run_dir / f"{SCRATCH_PREFIX}{cell_id}"


class RunDirError(ValueError):
    """The run directory cannot be used as asked (resume of nothing, a changed plan, in use)."""


class RunDirUnwritable(OSError):
    """The storage under the run directory refuses writes (read-only, full, no permission): the run
    failed for the machine's reason, not for a flag to change (the CLI's exit 1, not 2)."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def is_done(run_dir: Path, cell: CellSpec) -> bool:
    """The cell has an ok result measured with exactly this definition."""
    summary = read_summary(run_dir, cell.cell_id)
    return summary is not None and summary.ok and summary.cell == cell


class SweepState:
    """sweep-state.json: ``running`` (cell_id, started_at, t, sweep_pid) or null, and ``attempts``."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / STATE_FILE
        try:
            self.data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.data = {"running": None, "attempts": []}

    @property
    def running(self) -> dict | None:
        return self.data.get("running")

    def start(self, cell_id: str) -> None:
        self.data["running"] = {
            "cell_id": cell_id,
            "started_at": _now(),
            "t": time.time(),
            "sweep_pid": os.getpid(),
        }
        atomic_write_json(self.path, self.data)

    def finish(self, status: str) -> None:
        running = self.data["running"]
        self.data["attempts"].append(
            {
                "cell_id": running["cell_id"],
                "started_at": running["started_at"],
                "finished_at": _now(),
                "seconds": round(time.time() - running["t"], 3),
                "status": status,
            }
        )
        self.data["running"] = None
        atomic_write_json(self.path, self.data)


def record_interrupted(run_dir: Path, state: SweepState, cell: CellSpec, reason: str) -> CellSummary:
    """Publish the running cell as interrupted (what it was, when it started) and close its attempt."""
    running = state.running
    assert running is not None  # its callers record a cell that was running
    summary = CellSummary.failed(
        cell, f"interrupted: {reason}", status="interrupted", started_at=running["started_at"]
    )
    publish_cell(run_dir, cell.cell_id, {"summary.json": summary})
    state.finish("interrupted")
    return summary


def clean_stale(run_dir: Path) -> None:
    """Remove what a killed sweep or cell left half-done: publish staging directories, atomic-write
    temporaries, cell scratch; a result that was being replaced is put back."""
    for path in run_dir.glob(".*"):
        if path.name.endswith(".old") and path.is_dir():
            final = run_dir / path.name[1 : -len(".old")]
            if final.exists():
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.replace(path, final)
        elif path.name.endswith(".partial") or path.name.startswith(SCRATCH_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
        elif path.name.endswith(".tmp") and path.is_file():
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def hold(run_dir: Path) -> Iterator[None]:
    """One sweep at a time in a run directory (the lock goes with the process, even on SIGKILL)."""
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = (SweepState(run_dir).running or {}).get("sweep_pid", "?")
            raise RunDirError(f"{run_dir}: another iobench sweep (pid {pid}) is running in it") from None
        yield
    finally:
        os.close(fd)


def plan_differences(saved: list[CellSpec], cells: list[CellSpec]) -> list[str]:
    """How the new plan differs from the saved one, cell by cell (order does not matter)."""
    old = {c.cell_id: c for c in saved}
    new = {c.cell_id: c for c in cells}
    changed = sorted(i for i in old.keys() & new.keys() if old[i] != new[i])
    out = []
    for label, ids in (
        ("changed", changed),
        ("new", sorted(new.keys() - old.keys())),
        ("dropped", sorted(old.keys() - new.keys())),
    ):
        if ids:
            out.append(f"{len(ids)} {label} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})")
    return out


def saved_plan(run_dir: Path) -> list[CellSpec] | None:
    """The cells a sweep planned in ``run_dir`` (None without a readable cells.json)."""
    try:
        return [from_json(CellSpec, c) for c in json.loads((run_dir / CELLS_FILE).read_text())]
    except (OSError, ValueError, RecordError):
        return None


@dataclass
class Resumed:
    """What opening the run directory found: cells already done, and the one a kill interrupted."""

    done: set[str] = field(default_factory=set)
    interrupted: CellSummary | None = None  # the summary just recorded for it
    replanned: list[str] = field(default_factory=list)  # plan differences accepted with --force


def open_run(run_dir: Path, raw: dict, cells: list[CellSpec], *, resume: bool, force: bool) -> Resumed:
    """Check that the run directory may be used as asked, settle what a killed sweep left, and save
    the plan. Call with the directory held (``hold``)."""
    check_writable(run_dir)
    saved = saved_plan(run_dir)
    had_results = saved is not None or any(run_dir.glob("*/summary.json"))
    if resume and saved is None:
        raise RunDirError(
            f"--resume: {run_dir} holds no {CELLS_FILE}, so there is no sweep to resume there "
            "(drop --resume to start one)"
        )
    if had_results and not resume and not force:
        raise RunDirError(
            f"{run_dir} already holds a sweep: --resume continues it, --force starts it over, "
            "or choose another --out"
        )
    out = Resumed()
    clean_stale(run_dir)
    state = SweepState(run_dir)
    if state.running is not None:
        out.interrupted = _settle_running(run_dir, state, saved or cells)
    if resume:
        out.replanned = plan_differences(saved or [], cells)
        if out.replanned and not force:
            raise RunDirError(
                f"--resume: the sweep planned in {run_dir / CELLS_FILE} differs: {'; '.join(out.replanned)} "
                f"cell(s). Resume with the same sweep file and --set options (or none: {SWEEP_FILE} "
                "there is used), or add --force to re-plan: changed and new cells run, finished ones stay"
            )
        out.done = {c.cell_id for c in cells if is_done(run_dir, c)}
    with atomic_write(run_dir / SWEEP_FILE, "w") as f:
        yaml.safe_dump(raw, f, sort_keys=False)
    atomic_write_json(run_dir / CELLS_FILE, to_json(cells))
    return out


def check_writable(run_dir: Path) -> None:
    """Refuse a run directory the sweep cannot write to now, before any dataset or cell costs time
    (a read-only mount, a full disk, no permission: found by creating a file, as results will be).
    The probe is named like an atomic-write temporary, so clean_stale removes one a kill left."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", suffix=".tmp", dir=run_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise RunDirUnwritable(
            f"{run_dir}: results cannot be written there ({exc.strerror}); "
            "choose another --out, or make that directory writable"
        ) from None


def _settle_running(run_dir: Path, state: SweepState, cells: list[CellSpec]) -> CellSummary | None:
    """The sweep died while a cell ran: record it as interrupted, unless its result landed (the
    kill came between publishing and clearing the entry)."""
    running = state.running
    assert running is not None
    summary_path = run_dir / running["cell_id"] / "summary.json"
    if summary_path.exists() and summary_path.stat().st_mtime >= running["t"]:
        landed = read_summary(run_dir, running["cell_id"])
        state.finish(landed.status if landed else "failed")
        return None
    cell = next((c for c in cells if c.cell_id == running["cell_id"]), None)
    if cell is None:  # not in the plan: nothing to record it as
        state.finish("interrupted")
        return None
    return record_interrupted(
        run_dir, state, cell, f"the sweep (pid {running['sweep_pid']}) was killed while it ran"
    )
