"""A measured cell's figures: a summary whose status is ok carries its metrics and verdict
(CellSummary's contract); the report's views read them through here, so a summary that breaks the
contract says which cell it is instead of failing on None."""

from __future__ import annotations

from iobench.results.figures import PipelineMetrics, Verdict
from iobench.results.summary import CellSummary


def metrics_of(s: CellSummary) -> PipelineMetrics:
    if s.metrics is None:
        raise ValueError(f"cell {s.cell_id} ({s.status}) has no metrics: only measured cells are shown here")
    return s.metrics


def verdict_of(s: CellSummary) -> Verdict:
    if s.verdict is None:
        raise ValueError(f"cell {s.cell_id} ({s.status}) has no verdict: only measured cells are shown here")
    return s.verdict
