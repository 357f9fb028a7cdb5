"""The one analysis stage of a measured run: its steps' ledger in, every figure of the run out.

``analyse`` takes one rank's step rows (warm-up already marked), builds their ledger
(analysis/ledger.py) and derives from it, and from nothing else, the metrics, the wall split, the
epochs, the measured window and the verdict. A multi-rank cell's job figures come from the same
functions over its ranks' accounts clipped to their common interval (cell/ranks/rankmetrics.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from iobench.host.cpuload import HostLoad
from iobench.results.codec import from_json
from iobench.results.figures import (
    CoreBudget,
    EpochFigures,
    LoaderStats,
    PipelineMetrics,
    SampleLoss,
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
from .cores import core_budget
from .epochs import epoch_figures
from .evidence import ClientFacts, Evidence, reader_work
from .ledger import ledger, totals
from .losses import sample_loss
from .metrics import pipeline_metrics
from .verdict import judge


@dataclass(frozen=True)
class RunFacts:
    """What the analysis needs to know of the run besides its steps."""

    workers: int
    cores: int
    demand_samples_per_s: float | None  # every accelerator's the run fed, together
    au_basis: str
    readers_in_process: bool
    min_measure: MinMeasure
    requested_epochs: int
    capped: str | None  # what stopped the run adding epochs ("run.max_steps", "the 50-epoch limit", ...)
    # asked to be cold, on a tier read from this host's block devices: the window's reads from them
    # say whether it was
    cold: bool = False
    accelerators: int = 1  # the accelerators the run fed
    # the object client the tier reads through (evidence.client_facts of its description); None: none
    client: ClientFacts | None = None
    # a probed job's (probe/publish.py): the rate to feed where no demand is known, the readers'
    # measured busy share and what their stages are called, why they were not seen, the pinning, the
    # ceilings, and whether the ledger measured the hand-over (the batches matched to their making)
    feed: tuple[float, str] | None = None
    reader_busy: float | None = None
    stage_words: Mapping[str, str] = field(default_factory=dict)
    readers_seen: bool = True
    unseen: str | None = None
    unseen_action: str = "run with a backend that reports stage times"
    pin_ms_per_batch: float | None = None
    ceilings: Mapping[str, float] | None = None
    split_measured: bool = True


@dataclass(frozen=True)
class Analysis:
    """Every figure of one measured run, from its ledger."""

    entries: tuple[StepAccount, ...]
    metrics: PipelineMetrics
    split: WallSplit
    epochs: tuple[EpochFigures, ...]
    window: Window
    verdict: Verdict
    loss: SampleLoss | None = None  # samples the completed epochs did not deliver (losses.py)


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
    load: HostLoad | None = None,
    run_stats: StageStats | None = None,
    completed_epochs: int | None = None,
) -> Analysis:
    """One rank's run: ``rows`` its steps (warm-up marked), ``epoch_stats`` the loader's counters per
    epoch, ``measured_stats`` over the measured steps (the verdict's stage evidence),
    ``device_read_bytes`` what the cell's processes read from block devices over the window (a cold
    cell on such a tier), ``load`` the host's over the window (the core budget), ``run_stats`` the
    loader's counters over the whole run and ``completed_epochs`` its epochs run to their end (the
    samples lost against the epochs' plans)."""
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
    budget = budget_of(measured, load, facts.readers_in_process, metrics.wall_s)
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
    epochs = epoch_figures(entries, measured, epoch_stats)
    loss = (
        sample_loss(epochs, completed_epochs, from_json(LoaderStats, run_stats.as_dict()))
        if run_stats is not None and completed_epochs is not None
        else None
    )
    evidence = evidence_of(facts, metrics, measured_stats, window_totals.split(), run_window, budget)
    return Analysis(
        entries=entries,
        metrics=metrics,
        split=window_totals.split(),
        epochs=epochs,
        window=run_window,
        verdict=judge(replace(evidence, loss=loss)),
        loss=loss,
    )


def evidence_of(
    facts: RunFacts,
    metrics: PipelineMetrics,
    stats: StageStats,
    split: WallSplit,
    run_window: Window,
    budget: CoreBudget | None,
) -> Evidence:
    """What the judge argues from, for one rank's window."""
    work = (
        reader_work(
            stats,
            readers=max(1, facts.workers),
            workers=facts.workers,
            wall_s=metrics.wall_s,
            busy=facts.reader_busy,
            words=facts.stage_words,
        )
        if facts.readers_seen
        else None
    )
    return Evidence(
        metrics=metrics,
        work=work,
        cores=facts.cores,
        demand=facts.demand_samples_per_s,
        accelerators=facts.accelerators,
        split=split if facts.split_measured else None,
        budget=budget,
        feed=facts.feed,
        client=facts.client,
        counters=stats.counters,
        window=run_window,
        least=facts.min_measure,
        ceilings=facts.ceilings,
        unseen=facts.unseen,
        unseen_action=facts.unseen_action,
        pin_ms_per_batch=facts.pin_ms_per_batch,
    )


def budget_of(
    measured: Sequence[StepAccount], load: HostLoad | None, readers_in_process: bool, window_s: float
) -> CoreBudget | None:
    """The core budget of a window of ``window_s`` seconds from the host's ``load`` over it and its
    steps' trainer and reader CPU (every rank's, in a job)."""
    if load is None:
        return None
    trainer = [e.trainer_cpu_s for e in measured if e.trainer_cpu_s is not None]
    if not trainer:
        return None
    readers = sum(e.reader_cpu_s for e in measured) if readers_in_process else 0.0
    return core_budget(
        load, window_s=window_s, trainer_process_cpu_s=sum(trainer), readers_in_process_cpu_s=readers
    )
