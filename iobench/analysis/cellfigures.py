"""The one analysis stage of a measured run: its steps' ledger in, every figure of the run out.

``analyse`` takes one rank's step rows (warm-up already marked), builds their ledger
(analysis/ledger.py) and derives from it, and from nothing else, the metrics, the wall split, the
epochs, the measured window and the verdict. A multi-rank cell's job figures come from the same
functions over its ranks' accounts clipped to their common interval (cell/ranks/rankmetrics.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from iobench.results.figures import (
    EpochFigures,
    PipelineMetrics,
    StepAccount,
    StepAlone,
    StepRow,
    Verdict,
    WallSplit,
    Window,
)
from iobench.results.spec import MinMeasure
from loaders import StageStats
from loaders.observe import STAGES

from . import window as windows
from .epochs import epoch_figures
from .ledger import ledger, totals
from .metrics import pipeline_metrics
from .verdict import ClientFacts, attribute


@dataclass(frozen=True)
class RunFacts:
    """What the analysis needs to know of the run besides its steps."""

    workers: int
    cores: int
    demand_samples_per_s: float | None
    au_basis: str
    readers_in_process: bool
    min_measure: MinMeasure
    requested_epochs: int
    capped: str | None  # what stopped the run adding epochs ("run.max_steps", "the 50-epoch limit", ...)
    # asked to be cold, on a tier read from this host's block devices: the window's reads from them
    # say whether it was
    cold: bool = False
    # whole cores the trainer process keeps (an emulated trainer's host work); None: from the
    # trainer's measured CPU
    trainer_cores: int | None = None
    # the object client the tier reads through (verdict.client_facts of its description); None: none
    client: ClientFacts | None = None


@dataclass(frozen=True)
class Analysis:
    """Every figure of one measured run, from its ledger."""

    entries: tuple[StepAccount, ...]
    metrics: PipelineMetrics
    split: WallSplit
    epochs: tuple[EpochFigures, ...]
    window: Window
    verdict: Verdict


def stage_shares(stats: StageStats) -> tuple[float, ...]:
    """The stages' shares of the readers' wall per sample: how a wait is split for a batch that
    carries no stage times of its own."""
    wall = stats.per_sample_ms("wall")
    return tuple(wall.get(s, 0.0) for s in STAGES)


def analyse(
    rows: Sequence[StepRow],
    *,
    facts: RunFacts,
    epoch_stats: Sequence[StageStats],
    measured_stats: StageStats,
    alone: StepAlone | None = None,
    time_to_first_batch_s: float | None = None,
    device_read_bytes: int | None = None,
) -> Analysis:
    """One rank's run: ``rows`` its steps (warm-up marked), ``epoch_stats`` the loader's counters per
    epoch, ``measured_stats`` over the measured steps (the verdict's stage evidence),
    ``device_read_bytes`` what the cell's processes read from block devices over the window (a cold
    cell on such a tier)."""
    entries = ledger(rows, alone, stage_shares(measured_stats))
    measured = [e for e in entries if not e.warmup]
    window_totals = totals(measured)
    metrics = pipeline_metrics(
        measured,
        window_totals,
        every_step=entries,
        time_to_first_batch_s=time_to_first_batch_s,
        alone={rows[0].rank: alone} if alone is not None and rows else None,
        au_basis=facts.au_basis,
        readers_in_process=facts.readers_in_process,
    )
    run_window = windows.window_of(
        entries,
        facts.min_measure,
        epochs=len(epoch_stats),
        requested=facts.requested_epochs,
        capped=facts.capped,
        device_read_share=device_read_bytes / metrics.bytes_read
        if facts.cold and device_read_bytes is not None and metrics.bytes_read > 0
        else None,
    )
    verdict = attribute(
        metrics,
        measured_stats,
        workers=facts.workers,
        cores=facts.cores,
        demand_samples_per_s=facts.demand_samples_per_s,
        trainer_cores=facts.trainer_cores,
        client=facts.client,
    )
    return Analysis(
        entries=entries,
        metrics=metrics,
        split=window_totals.split(),
        epochs=epoch_figures(entries, measured, epoch_stats),
        window=run_window,
        verdict=marked(verdict, run_window, facts.min_measure),
    )


def marked(verdict: Verdict, run_window: Window, least: MinMeasure) -> Verdict:
    """The verdict with what limits its figures said in its headline: a window short of
    ``run.min_measure`` (``least``), a cold window that read (almost) nothing from its devices."""
    said = []
    if not run_window.met:
        said.append(
            f"measured only {run_window.steps} steps over {run_window.seconds:.2f} s after warm-up "
            f"(run.min_measure: {least.steps} steps, {least.seconds:g} s), stopped by "
            f"{run_window.short_because}: treat the figures as indicative"
        )
    if run_window.cached:
        said.append(
            f"asked to be cold, but over the measured window the cell's processes read from block devices "
            f"{100 * run_window.device_read_share:.1f} % of the bytes the loader read: the window was served "  # type: ignore[operator]
            "from the page cache, not the tier (the warm-up took the cold reads, or epochs added to reach the "
            "window re-read cached data); a dataset with run.min_measure's steps in one epoch measures it cold"
        )
    if not said:
        return verdict
    return replace(verdict, headline=verdict.headline + "".join(f" [{s}]" for s in said))
