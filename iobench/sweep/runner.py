"""Run a sweep's cells, each in a fresh process, publishing results as they land, so that a sweep
can be left running, stopped (SIGTERM, Ctrl-C) or killed, and resumed (rundir.py)."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from iobench.cell.protocol import NodePlace, cell_command
from iobench.results.codec import to_json
from iobench.results.spec import CellSpec
from iobench.results.store import SUMMARY_NAME, read_summary, write_results_table
from iobench.results.summary import CellSummary
from iobench.sweep.config import SweepConfig
from iobench.sweep.datasetspec import DatasetSpec, bind_tier
from iobench.sweep.outcome import OomCount, cell_outcome
from iobench.sweep.rundir import (
    Resumed,
    RunDirUnwritable,
    SweepState,
    hold,
    open_run,
    record_interrupted,
    scratch_dir,
)
from iobench.sweep.supervise import RunningCellPaths, supervise
from iobench.tiers.cachebooks import RamCacheBooks, settle_ram_leftovers


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
        self._ram_caches = RamCacheBooks(run_dir)

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
        self.notes += self._ram_caches.claim(cell.tier for cell in self.todo())
        with contextlib.ExitStack() as cleanup, _on_stop_signals(_raise_interrupted):
            # RAM is not left behind: each RAM cache goes with the sweep, unless kept on request
            cleanup.callback(lambda: self.notes.extend(self._ram_caches.release()))
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

    def _run_cell(self, cell: CellSpec, state: SweepState, events: SweepEvents) -> CellSummary:
        scratch = scratch_dir(self.run_dir, cell.cell_id)
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        try:
            return self._attempt(cell, state, events, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _command(self, cell: CellSpec, spec: Path) -> list[str]:
        return cell_command(spec, self.run_dir, cell.run, place=self.place, run_id=cell.cell_id)

    def _attempt(self, cell: CellSpec, state: SweepState, events: SweepEvents, scratch: Path) -> CellSummary:
        """One cell in a child interpreter (or torchrun and its ranks); a crash, a time-out or a stall
        becomes a failed cell, not a lost one, with its output kept in the cell's log."""
        files = RunningCellPaths(scratch, self.run_dir / cell.cell_id / SUMMARY_NAME)
        files.spec.write_text(json.dumps(to_json(cell)))
        state.start(cell.cell_id)
        started = time.time()
        oom = OomCount()
        ended = supervise(
            self._command(cell, files.spec),
            cell,
            files,
            timeout_s=self.config.run.settings.timeout_s,
            started=started,
            on_live=functools.partial(events.live, cell),
        )
        summary = cell_outcome(self.run_dir, cell, ended, files, started=started, oom=oom)
        state.finish(summary.status)
        return summary
