"""What one measured run of a cell leaves: its step log and, with its analysis, the measurement.

The step loop fills a ``StepLog`` (steps/steploop.py); a run's ``Measurement`` (measure.py) adds
its figures, cache state and telemetry; the ranks, the ceilings and the file builder read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iobench.analysis.cellfigures import Analysis
from iobench.cell.telemetry import Telemetry
from iobench.results.checkpoint import CheckpointFigures
from iobench.results.figures import (
    CacheState,
    PipelineMetrics,
    SteadyState,
    StepAlone,
    StepRow,
    Verdict,
    Window,
)
from loaders import StageStats


@dataclass
class StepLog:
    rows: list[StepRow] = field(default_factory=list)
    measured_stats: StageStats = field(default_factory=StageStats)  # from batches after warm-up
    all_stats: StageStats = field(default_factory=StageStats)
    epoch_stats: list[StageStats] = field(default_factory=list)  # every step, warm-up included
    row_stats: list[StageStats] = field(default_factory=list)  # one per row: warm-up can be re-marked
    created_at: float = 0.0  # perf_counter when the loader was built; rows are relative to it
    time_to_first_batch_s: float | None = None
    epochs_completed: int = 0
    measure_start: float | None = None  # perf_counter when the first measured step began
    measure_end: float | None = None
    keys: list[tuple[int, int, int, str]] = field(default_factory=list)  # (rank, epoch, step, key)
    dropped_batches: int = 0  # synchronous cells: batches unused because a peer's epoch ran out
    # the (x, y) of the last full-sized step: the step alone is timed on it (an epoch's short last
    # batch would make the step alone short and the trainer's slowdown read many times too high)
    last_input: tuple[object, object] | None = None


@dataclass
class Measurement:
    log: StepLog
    analysis: Analysis  # every figure of the run, from its steps' ledger (analysis/cellfigures.py)
    cache_state: CacheState | None  # None on a rank that is not the first on its host
    telemetry: Telemetry  # empty on a rank that is not the first on its host
    steady: SteadyState | None  # None when the warm-up was a fixed count
    released_at: float = 0.0  # time.time() as the loader was built: where the barrier let this rank go
    alone: StepAlone | None = None  # the step timed alone after the loop (alone.py)
    checkpoint: CheckpointFigures | None = None  # a checkpoint cell's saves, restores and cost

    @property
    def rows(self) -> list[StepRow]:
        return self.log.rows

    @property
    def metrics(self) -> PipelineMetrics:
        return self.analysis.metrics

    @property
    def verdict(self) -> Verdict:
        return self.analysis.verdict

    @property
    def window(self) -> Window:
        return self.analysis.window
