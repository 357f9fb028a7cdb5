"""Run a sweep's cells, each in a fresh process, publishing results as they land, so that a sweep
can be left running, stopped (SIGTERM, Ctrl-C) or killed, and resumed (runstate.py)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from iobench.cell.distributed import RANK_ERRORS_ENV, first_rank_error
from iobench.cell.lifeline import PARENT_ENV
from iobench.cell.live import LIVE_ENV, read_live
from iobench.cell.torchrun import NodePlace, torchrun_command
from iobench.host.atomic import atomic_write
from iobench.host.memory import oom_kills, usable_memory
from iobench.results.codec import to_json
from iobench.results.spec import CellSpec
from iobench.results.store import publish_cell, read_summary, write_results_table
from iobench.results.summary import CellSummary
from iobench.sweep.config import SweepConfig
from iobench.sweep.datasetspec import DatasetSpec, bind_tier
from iobench.sweep.rundir import (
    LIVE_NAME,
    Resumed,
    RunDirUnwritable,
    SweepState,
    hold,
    open_run,
    record_interrupted,
    scratch_dir,
)
from iobench.sweep.watchdog import StallWatch, describe_processes, group_processes, process_table
from iobench.tiers import ramcache
from iobench.tiers.faults import blame_out_of_memory, exit_status, explain, out_of_memory, tier_location

POLL_S = 0.5
KILL_GRACE_S = 5.0
EXIT_GRACE_S = 10.0  # a cell that published its result and still runs after this is killed
LOG_NAME = "cell.log"  # a failed cell's output (its traceback) in its directory
LOG_MAX_BYTES = 2 << 20
# cell processes that did not exit even after SIGKILL (a system call blocked in the kernel, e.g. a
# read on a FUSE mount whose daemon waits for a dead OSD): reaped once they do
_UNREAPED: list[subprocess.Popen] = []


class SweepInterrupted(Exception):
    """SIGTERM or SIGINT stopped the sweep; ``cell_id`` names the cell then running, now recorded
    as interrupted (None: none was running)."""

    def __init__(self, signum: int, cell_id: str | None) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
        self.cell_id = cell_id


class SweepEvents:
    """What a sweep reports as it goes; the CLI's progress display overrides these."""

    def cell_start(self, index: int, cell: CellSpec) -> None:
        pass

    def live(self, cell: CellSpec, figures: dict | None, elapsed_s: float) -> None:
        pass

    def cell_done(self, index: int, cell: CellSpec, summary: CellSummary, seconds: float) -> None:
        pass


def ensure_datasets(
    config: SweepConfig,
    datasets: list[DatasetSpec],
    progress: Callable[[DatasetSpec, int, int], None] | None = None,
) -> None:
    """Generate each configured synthetic dataset once (reused when complete), and its
    one-object-per-sample layout when a loader reads that layout."""
    for dataset in datasets:
        if dataset.synth is not None:
            from iobench.datasets.synth import ensure_dataset

            report = functools.partial(progress, dataset) if progress else None
            ensure_dataset(dataset.path, progress=report, **dataset.synth)
        if "objects" in config.layouts():
            from iobench.datasets.objects import explode

            explode(dataset.path)


def upload_to_tiers(config: SweepConfig, datasets: list[DatasetSpec]) -> list[str]:
    """Upload each dataset to every tier marked ``upload: true`` (idempotent, verified)."""
    from iobench.tiers import make_tier

    return [
        make_tier(tier).upload_dataset(str(d.path))
        for d in datasets
        for tier in (bind_tier(t, d) for t in config.tiers)
        if tier.get("upload")
    ]


@contextlib.contextmanager
def _on_stop_signals(handler: Callable | int) -> Iterator[None]:
    """``handler`` for SIGTERM and SIGINT while inside (signals reach the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, previous in old.items():
            signal.signal(s, previous)


def _raise_interrupted(signum: int, frame: object) -> None:
    raise SweepInterrupted(signum, None)


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


OOM_SCORE_ADJ = 500  # above the sweep's own score


def _first_to_go(pid: int) -> None:
    """The cell (and the workers and ranks it starts, which inherit it) before the sweep, when the
    kernel must kill a process for memory: the sweep survives to record the cell as failed, say why,
    and go on. Raising a score needs no privilege; the cell has not forked yet (it is importing)."""
    with contextlib.suppress(OSError, ValueError):
        own = int(Path("/proc/self/oom_score_adj").read_text())
        Path(f"/proc/{pid}/oom_score_adj").write_text(str(min(1000, max(OOM_SCORE_ADJ, own + OOM_SCORE_ADJ))))


def _reap() -> None:
    for proc in list(_UNREAPED):
        if proc.poll() is not None:
            _UNREAPED.remove(proc)


def _last_words(stderr: str) -> str | None:
    """What a cell's stderr says last; for torchrun, the root-cause rank, its host and exit code (a
    rank killed by a signal leaves no report of its own)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    marker = "Root Cause (first observed failure):"
    if marker not in lines:
        return lines[-1] if lines else None
    said: dict[str, str] = {}
    for line in lines[lines.index(marker) :]:
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("host", "rank", "exitcode"):
            said.setdefault(key.strip(), value.strip())
    return "torchrun: " + ", ".join(f"{k} {v}" for k, v in said.items())


class Sweep:
    """A sweep in a run directory: ``with Sweep(...) as sweep: sweep.run(events)``.

    Entering holds the directory, settles what a killed sweep left (an interrupted cell is
    recorded as such), checks a resumed plan against the saved one and saves the plan.

    Multi-rank cells (run.ranks_per_node, run.nodes) run under torchrun; with several nodes the same
    sweep runs on every node, each with its own ``place`` and its own run directory.
    """

    def __init__(
        self,
        config: SweepConfig,
        run_dir: Path,
        *,
        resume: bool = False,
        force: bool = False,
        place: NodePlace | None = None,
    ) -> None:
        self.config = config
        self.place = place
        self.run_dir = run_dir
        self.cells = config.cells()
        self.resume, self.force = resume, force
        self.resumed = Resumed()
        self._held = contextlib.ExitStack()
        # what the sweep did beside its cells (RAM caches found, removed or kept): the CLI prints them
        self.notes: list[str] = []
        self._ram_caches: dict[str, bool] = {}  # RAM cache directory -> keep it after the sweep

    def __enter__(self) -> Sweep:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirUnwritable(
                f"{self.run_dir}: cannot create the run directory ({exc.strerror}); choose another --out"
            ) from None
        with contextlib.ExitStack() as stack:
            stack.enter_context(hold(self.run_dir))
            self.resumed = open_run(
                self.run_dir,
                self.config.raw,
                self.cells,
                resume=self.resume,
                force=self.force,
            )
            if self.resumed.interrupted or self.resumed.done:
                # the table follows the summaries, and a kill can leave it behind them: after it
                # interrupted a cell, or after a cell's summary landed but before the table was
                # rewritten (then no cell may be left to run, and nothing else would rewrite it)
                self._write_table()
            self._held = stack.pop_all()  # held until __exit__; released here only on error
        self.notes += settle_ram_leftovers()
        return self

    def __exit__(self, *exc: object) -> None:
        self._held.close()

    def todo(self) -> list[CellSpec]:
        return [c for c in self.cells if c.cell_id not in self.resumed.done]

    def _write_table(self) -> None:
        write_results_table(self.run_dir, order=[c.cell_id for c in self.cells])

    def run(self, events: SweepEvents | None = None) -> list[CellSummary]:
        """Run every cell not done yet; returns the summaries of all cells of the plan, in order."""
        events = events or SweepEvents()
        state = SweepState(self.run_dir)
        summaries = []
        self._claim_ram_caches()
        with contextlib.ExitStack() as cleanup, _on_stop_signals(_raise_interrupted):
            cleanup.callback(self._release_ram_caches)
            for i, cell in enumerate(self.cells):
                kept = read_summary(self.run_dir, cell.cell_id) if cell.cell_id in self.resumed.done else None
                if kept is not None:
                    summaries.append(kept)
                    continue
                events.cell_start(i, cell)
                t0 = time.perf_counter()
                try:
                    summary = self._run_cell(cell, state, events)
                except (SweepInterrupted, KeyboardInterrupt) as exc:
                    signum = exc.signum if isinstance(exc, SweepInterrupted) else signal.SIGINT
                    if state.running is None:  # stopped before the cell started: nothing to record
                        raise SweepInterrupted(signum, None) from None
                    with _on_stop_signals(signal.SIG_IGN):  # a second Ctrl-C must not cut the record short
                        name = signal.Signals(signum).name
                        record_interrupted(self.run_dir, state, cell, f"the sweep got {name}")
                        self._write_table()
                    raise SweepInterrupted(signum, cell.cell_id) from None
                self._write_table()
                summaries.append(summary)
                events.cell_done(i, cell, summary, time.perf_counter() - t0)
        return summaries

    def _claim_ram_caches(self) -> None:
        """Mark the RAM caches this sweep's cells use as its own (see iobench.tiers.ramcache)."""
        for cell in self.todo():
            found = client_cache(cell.tier)
            if found is None or found[1] != ramcache.RAM_MEDIUM or found[0] in self._ram_caches:
                continue
            keep = bool(_spec_value(cell.tier, "keep_memory_cache"))
            try:
                ramcache.claim(found[0], self.run_dir, keep=keep)
            except OSError as exc:
                self.notes.append(f"could not mark the RAM cache {found[0]} as this sweep's: {exc}")
                continue
            self._ram_caches[found[0]] = keep

    def _release_ram_caches(self) -> None:
        """RAM is not left behind: each RAM cache goes with the sweep, unless kept on request."""
        for path, keep in self._ram_caches.items():
            if keep:
                size = ramcache.dir_bytes(path) if os.path.isdir(path) else 0
                self.notes.append(
                    f"kept the RAM cache {path} ({size / 1e6:,.1f} MB, tier option keep_memory_cache); "
                    f"it holds that RAM until removed: rm -r {path}"
                )
            else:
                freed = ramcache.release(path)
                self.notes.append(f"removed the RAM cache {path} ({freed / 1e6:,.1f} MB)")
        self._ram_caches.clear()

    def _run_cell(self, cell: CellSpec, state: SweepState, events: SweepEvents) -> CellSummary:
        scratch = scratch_dir(self.run_dir, cell.cell_id)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        try:
            return self._attempt(cell, state, events, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _command(self, cell: CellSpec, spec: Path) -> list[str]:
        ranks, nodes = cell.run.ranks_per_node, cell.run.nodes
        if ranks == 1 and nodes == 1:
            return [sys.executable, "-m", "iobench.cell.process", str(spec), str(self.run_dir)]
        return torchrun_command(
            spec,
            self.run_dir,
            ranks_per_node=ranks,
            nodes=nodes,
            place=self.place,
            run_id=cell.cell_id,
            timeout_s=cell.run.timeout_s,
        )

    def _attempt(self, cell: CellSpec, state: SweepState, events: SweepEvents, scratch: Path) -> CellSummary:
        """One cell in a child interpreter (or torchrun and its ranks); a crash, a time-out or a stall
        becomes a failed cell, not a lost one, with its output kept in the cell's log."""
        spec, stderr_path, live_path = scratch / "cell.json", scratch / "stderr.log", scratch / LIVE_NAME
        spec.write_text(json.dumps(to_json(cell)))
        timeout_s = self.config.run.timeout_s
        watch = StallWatch(cell.run.stall_timeout)
        summary_path = self.run_dir / cell.cell_id / "summary.json"
        state.start(cell.cell_id)
        started = time.time()
        error = None
        notes: list[str] = []
        proc = None
        oom_before = oom_kills()
        try:
            with open(stderr_path, "w") as stderr:
                proc = subprocess.Popen(
                    self._command(cell, spec),
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    env={
                        **os.environ,
                        "PYTHONUNBUFFERED": "1",
                        # `python -m` would put the working directory first on the cell's (and its
                        # ranks') import path: a user's own loaders/ or iobench/ package there would
                        # stand in for ours. Python >= 3.11 leaves it off; 3.10 ignores the variable
                        "PYTHONSAFEPATH": "1",
                        LIVE_ENV: str(live_path),
                        PARENT_ENV: str(os.getpid()),
                        RANK_ERRORS_ENV: str(scratch),
                    },
                    # a process group of its own: killed as a whole, and spared the terminal's Ctrl-C,
                    # which the sweep handles
                    start_new_session=True,
                )
            _first_to_go(proc.pid)
            t0 = time.monotonic()
            landed: float | None = None
            while proc.poll() is None:
                now = time.monotonic()
                elapsed = now - t0
                if elapsed > timeout_s:
                    error = (
                        f"cell did not finish within run.timeout_s={timeout_s} s; tier {cell.tier_name!r}: "
                        f"{tier_location(cell.tier)}; {describe_processes(proc.pid) or 'no process left'}\n"
                        "hint: raise run.timeout_s for a longer cell, or see the cell's log (cell.log)"
                    )
                    notes.append(f"run.timeout_s: killed after {elapsed:.1f} s")
                    break
                figures = read_live(live_path)
                events.live(cell, figures, elapsed)
                watch.see(figures, _mtime(live_path), now)
                quiet = watch.stalled_for(now)
                if quiet is not None:
                    error = watch.message(cell, quiet, describe_processes(proc.pid))
                    notes.append(f"watchdog: no batch for {quiet:.1f} s\n{process_table(proc.pid)}")
                    break
                if landed is None and (_mtime(summary_path) or 0) >= started:
                    landed = now
                if landed is not None and now - landed > EXIT_GRACE_S:
                    notes.append(f"the cell published its result but had not exited {EXIT_GRACE_S:g} s later")
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(POLL_S)
        finally:
            if proc is not None:
                left = _kill_group(proc)
                if left:
                    notes.append(left)
            removed = _remove_partials(cell.tier)
            if removed:
                notes.append(removed)
        if error is None and proc.returncode not in (0, None):
            said = first_rank_error(scratch) or _last_words(stderr_path.read_text(errors="replace"))
            error = explain(said or exit_status(proc.returncode), cell.tier)
        # a summary older than this attempt is an earlier attempt's
        summary = read_summary(self.run_dir, cell.cell_id) if summary_path.exists() else None
        fresh = summary is not None and summary_path.stat().st_mtime >= started
        rewrite = summary is None or not fresh or (error is not None and summary.status != "failed")
        if rewrite:
            summary = CellSummary.failed(cell, error or "cell wrote no summary")
        oom_after = oom_kills()
        if (
            summary.status == "failed"
            and oom_before
            and oom_after
            and oom_after[1] == oom_before[1]  # counted in the same place
            and oom_after[0] > oom_before[0]
        ):
            oom = out_of_memory(oom_after[0] - oom_before[0], oom_after[1], usable_memory().describe())
            message = summary.error or exit_status(proc.returncode)
            summary, rewrite = (
                replace(summary, error=blame_out_of_memory(message, proc.returncode, oom)),
                True,
            )
        if rewrite:
            publish_cell(self.run_dir, cell.cell_id, {"summary.json": summary})
        if summary.status != "ok":
            _keep_log(self.run_dir / cell.cell_id / LOG_NAME, stderr_path, summary.error, notes)
        state.finish(summary.status)
        return summary


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _keep_log(dest: Path, stderr_path: Path, error: str | None, notes: list[str]) -> None:
    """The failed cell's output (its traceback) and what the sweep saw, beside its summary."""
    try:
        size = stderr_path.stat().st_size
        with open(stderr_path, "rb") as f:
            if size > LOG_MAX_BYTES:
                f.seek(size - LOG_MAX_BYTES)
            text = f.read().decode(errors="replace")
    except OSError:
        size, text = 0, ""
    head = f"[the first {size - LOG_MAX_BYTES} bytes are left out]\n" if size > LOG_MAX_BYTES else ""
    parts = [f"--- the cell's output (stderr){' ' + head if head else ''}\n{text.rstrip()}"]
    parts += [f"--- iobench sweep: {note}" for note in notes]
    parts.append(f"--- the summary's error\n{error}")
    with contextlib.suppress(OSError), atomic_write(dest, "w") as f:
        f.write("\n".join(parts) + "\n")


def _spec_value(spec: dict, key: str) -> object:
    """A tier option, looked for in a throttled tier's inner tier too."""
    if key in spec:
        return spec[key]
    inner = spec.get("inner")
    return inner.get(key) if isinstance(inner, dict) else None


def client_cache(spec: dict) -> tuple[str, str] | None:
    """(directory, medium) of a tier's shard cache, when its sweep-file entry asks for one."""
    if not (_spec_value(spec, "cache_dir") or _spec_value(spec, "memory_cache")):
        return None
    from iobench.tiers import make_tier

    try:
        return make_tier(spec).client_cache()
    except Exception:  # the cell reports a tier it cannot build; the sweep only cleans up after it
        return None


def _remove_partials(spec: dict) -> str | None:
    """Partial downloads a killed cell left in its tier's shard cache, removed (named in its log)."""
    found = client_cache(spec)
    if found is None:
        return None
    try:
        n = ramcache.remove_partials(found[0])
    except OSError as exc:
        return f"could not check the shard cache {found[0]} for partial downloads: {exc}"
    return f"removed {n} partial download(s) the cell's killed processes left in {found[0]}" if n else None


def settle_ram_leftovers() -> list[str]:
    """RAM caches of sweeps that ended without removing them: removed (kept ones reported)."""
    notes = []
    for left in ramcache.leftovers():
        if left.owner_alive:
            continue  # a sweep running now
        if left.kept:
            notes.append(f"a RAM cache kept on request holds RAM: {left.describe()}; rm -r {left.path}")
        elif left.owner_pid is None:
            notes.append(
                f"found a RAM cache of unknown origin: {left.describe()}; rm -r {left.path} frees it"
            )
        else:
            ramcache.release(left.path)
            notes.append(f"removed a RAM cache left by a sweep that did not finish: {left.describe()}")
    return notes
