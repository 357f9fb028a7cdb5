"""The sweep's progress: cells done and left, an ETA, and the running cell's live samples/s and
stall fraction (polled from the cell's live file, run/live.py).

The ETA starts from the dry-run estimate (estimate.py) and is corrected by the ratio of measured to
estimated durations of the cells finished so far. On a terminal it is a live rich display; forced
with --progress onto a pipe or a file it is a plain line every LINE_EVERY_S seconds; otherwise
only the per-cell lines are printed. A fault in the display switches it off, never the sweep.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.text import Text

from iobench.results.spec import CellSpec
from iobench.results.summary import CellSummary
from iobench.sweep.estimate import CellEstimate, format_duration
from iobench.sweep.runner import SweepEvents

LINE_EVERY_S = 15.0
MODES = ("live", "lines", "off")


class SweepProgress(SweepEvents):
    def __init__(
        self,
        console: Console,
        cells: list[CellSpec],
        estimates: dict[str, CellEstimate],
        done: set[str],
        mode: str,
    ) -> None:
        self.console = console
        self.n = len(cells)
        self.estimates = estimates
        self.left = [c.cell_id for c in cells if c.cell_id not in done]
        self.finished = self.n - len(self.left)
        self.mode = mode
        self.measured_s = 0.0  # finished cells with an estimate: measured and estimated seconds
        self.estimated_s = 0.0
        self.current: CellSpec | None = None
        self.elapsed = 0.0
        self.last_line = 0.0
        self._bar: Progress | None = None
        self._tasks: tuple[TaskID, TaskID] | None = None

    def __enter__(self) -> SweepProgress:
        if self.mode == "live":
            self._bar = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                TextColumn("{task.fields[info]}", markup=False),
                console=self.console,
                transient=True,  # gone before the report is printed
                refresh_per_second=2,
            )
            self._bar.start()
            self._tasks = (
                self._bar.add_task("cells", total=self.n, completed=self.finished, info=self._eta()),
                self._bar.add_task("", total=None, info=""),
            )
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.stop()

    def _ratio(self) -> float:
        return self.measured_s / self.estimated_s if self.estimated_s > 0 else 1.0

    def eta_s(self) -> tuple[float, bool]:
        """Seconds left, and whether every cell left has an estimate."""
        ratio, total, known = self._ratio(), 0.0, True
        for cell_id in self.left:
            seconds = self.estimates[cell_id].seconds if cell_id in self.estimates else None
            if seconds is None:
                known = False
                continue
            running = self.current is not None and cell_id == self.current.cell_id
            total += max(0.0, seconds * ratio - self.elapsed) if running else seconds * ratio
        return total, known

    def _eta(self) -> str:
        seconds, known = self.eta_s()
        basis = "" if self.estimated_s else " (estimate)"
        return f"ETA {'' if known else '>= '}{format_duration(seconds)}{basis}"

    def _figures(self, figures: dict | None) -> str:
        if not figures or not figures.get("steps"):
            return f"starting ({self.elapsed:.0f} s)"
        parts = [f"run {figures['run']}", f"{figures['samples']:,} samples"]
        if figures.get("samples_per_s") is not None:
            parts.append(f"{figures['samples_per_s']:,.0f} samples/s")
        if figures.get("stall_fraction") is not None:
            parts.append(f"stall {figures['stall_fraction']:.0%}")
        return " · ".join(parts)

    def _guarded(self, update: Callable[[], None]) -> None:
        try:
            update()
        except Exception as exc:  # a display fault must not stop a measurement
            self._stop()
            self.mode = "off"
            self.console.print(Text(f"progress display switched off: {exc}", "yellow"))

    def cell_start(self, index: int, cell: CellSpec) -> None:
        self.current, self.elapsed, self.last_line = cell, 0.0, time.monotonic()
        self.console.print(f"[{index + 1}/{self.n}] {cell.cell_id} ...", markup=False)

        def update() -> None:
            if self._bar is not None and self._tasks is not None:
                est = self.estimates.get(cell.cell_id)
                self._bar.update(
                    self._tasks[1], description=cell.cell_id, total=est.samples if est else None, completed=0
                )

        self._guarded(update)

    def live(self, cell: CellSpec, figures: dict | None, elapsed_s: float) -> None:
        self.elapsed = elapsed_s

        def update() -> None:
            status = self._figures(figures)
            if self._bar is not None and self._tasks is not None:
                self._bar.update(self._tasks[0], info=f"{self.finished}/{self.n} done, {self._eta()}")
                self._bar.update(self._tasks[1], completed=(figures or {}).get("samples", 0), info=status)
            elif self.mode == "lines" and time.monotonic() - self.last_line >= LINE_EVERY_S:
                self.last_line = time.monotonic()
                self.console.print(f"      {status}; {self.finished}/{self.n} cells done, {self._eta()}")

        self._guarded(update)

    def cell_done(self, index: int, cell: CellSpec, summary: CellSummary, seconds: float) -> None:
        est = self.estimates.get(cell.cell_id)
        if est is not None and est.seconds is not None:
            self.measured_s += seconds
            self.estimated_s += est.seconds
        if cell.cell_id in self.left:  # a kept result that could not be read back runs again
            self.left.remove(cell.cell_id)
            self.finished += 1
        self.current = None
        if summary.ok and summary.metrics and summary.verdict:
            m = summary.metrics
            self.console.print(
                f"      {m.samples_per_s:,.0f} samples/s, AU {m.au:.2f}, {summary.verdict.bound}-bound ({seconds:.0f} s)"
            )
        else:
            self.console.print(Text.assemble(("      " + summary.status, "red"), f": {summary.error}"))

        def update() -> None:
            if self._bar is not None and self._tasks is not None:
                self._bar.update(
                    self._tasks[0],
                    completed=self.finished,
                    info=f"{self.finished}/{self.n} done, {self._eta()}",
                )

        self._guarded(update)
