"""The one analysis stage of a cell: a measured run's steps' ledger in, every figure of the run out;
the cell's measured runs in, every figure of the cell out.

``analyse`` takes one rank's step rows (warm-up already marked), builds their ledger
(analysis/ledger.py) and derives from it, and from nothing else, the metrics, the wall split, the
epochs, the measured window and the verdict. A multi-rank cell's job figures come from the same
functions over its ranks' accounts clipped to their common interval (cell/entry/rankmetrics.py).

``analyse_cell`` takes a cell's repeats, each analysed so, and chooses the one its summary quotes
(the median); from them come the spread over repeats, the cache-honesty warnings, MLPerf Storage's
view, the step times and the synchronous job predicted at scale.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from iobench.host.cpuload import HostLoad
from iobench.results.codec import from_json
from iobench.results.figures import (
    CacheState,
    Ceilings,
    CoreBudget,
    EpochFigures,
    LoaderStats,
    MlperfFigures,
    PipelineMetrics,
    SampleLoss,
    ScalePoint,
    StepAccount,
    StepAlone,
    StepRow,
    StepTimes,
    Verdict,
    WallSplit,
    Window,
)
from iobench.results.spec import CellSpec, MinMeasure
from iobench.results.summary import RepeatFigures, Stability
from loaders import StageStats
from loaders.observe import STAGES

from . import scale
from . import window as windows
from .cores import core_budget
from .epochs import epoch_figures
from .evidence import ClientFacts, Evidence, reader_work
from .honesty import cache_warnings, epoch1_vs_steady, epoch_delta, light_work_warnings
from .ledger import ledger, totals
from .losses import sample_loss
from .metrics import pipeline_metrics
from .mlperf import mlperf_figures, reading_of
from .queue import LoaderQueue
from .repeats import summarize
from .steptimes import step_times
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
    ceilings: Ceilings | None = None
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


class MeasuredRun(Protocol):
    """One measured repeat of a cell as the cell's figures read it (cell/records.py, Measurement)."""

    @property
    def analysis(self) -> Analysis: ...

    @property
    def rows(self) -> Sequence[StepRow]: ...

    @property
    def cache_state(self) -> CacheState | None: ...

    @property
    def alone(self) -> StepAlone | None: ...


@dataclass(frozen=True)
class SetupFacts:
    """What a cell's figures need to know of its setup besides its repeats."""

    cell: CellSpec
    # the modelled all-reduce a step waits for, at (world size, compute seconds); None: not modelled
    exposed_allreduce: Callable[[int, float], float] | None
    mlperf_threshold: float | None  # MLPerf Storage's AU pass mark for the cell's model, where it has one
    dataset_bytes: int
    server_caches: str | None  # the tier's word on caches past the client's control
    notes: tuple[str, ...] = ()  # what the setup says of itself beside the figures (said last)


@dataclass(frozen=True)
class CellFigures:
    """A cell's figures over its repeats; the chosen repeat's own are its ``Analysis``."""

    chosen: int  # the index of the repeat the summary quotes (median_run)
    warmup_steps: int  # of the chosen repeat
    repeats: tuple[RepeatFigures, ...]
    stability: Stability
    mlperf: MlperfFigures | None
    warnings: tuple[str, ...]
    epoch_delta: float | None
    epoch1_vs_steady: float | None
    step_times: StepTimes | None
    scale: tuple[ScalePoint, ...]  # the synchronous job predicted at scale (analysis/scale.py)
    scale_method: str
    scale_queue_depth: int  # requests the model let each rank's loader have in flight


def median_run(runs: Sequence[MeasuredRun]) -> int:
    """The index of the repeat whose samples/s is the median (the lower one of an even count): a
    real repeat, so all of its figures belong together."""
    ordered = sorted(range(len(runs)), key=lambda i: runs[i].analysis.metrics.samples_per_s)
    return ordered[(len(ordered) - 1) // 2]


def analyse_cell(runs: Sequence[MeasuredRun], facts: SetupFacts) -> CellFigures:
    """A cell's figures from its measured repeats: the chosen one's steps give the epochs' change,
    the step times and the synchronous job predicted at scale; every repeat's, their spread and
    whether a cache flattered them."""
    chosen = median_run(runs)
    cell, run, rows = facts.cell, runs[chosen].analysis, runs[chosen].rows
    metrics, epochs = run.metrics, run.epochs
    queue = scale.replay_queue(
        [r for r in rows if not r.warmup], LoaderQueue(cell.loader.workers, cell.loader.prefetch)
    )
    points = scale.predict_at_scale(
        rows, facts.exposed_allreduce or _no_allreduce, queue=queue, alone=runs[chosen].alone
    )
    states = [m.cache_state for m in runs if m.cache_state is not None]
    return CellFigures(
        chosen=chosen,
        warmup_steps=sum(r.warmup for r in rows),
        repeats=tuple(
            RepeatFigures(
                samples_per_s=m.analysis.metrics.samples_per_s,
                au=m.analysis.metrics.au,
                cache=m.cache_state.achieved if m.cache_state else None,
            )
            for m in runs
        ),
        stability=Stability(
            samples_per_s=summarize([m.analysis.metrics.samples_per_s for m in runs]),
            au=summarize([m.analysis.metrics.au for m in runs]),
        ),
        mlperf=mlperf_figures(
            epochs,
            metrics,
            cell.accelerator.count * cell.run.world_size,
            facts.mlperf_threshold,
            reading_of(cell),
        ),
        warnings=(
            *cache_warnings(cell.cache, states, epochs, facts.dataset_bytes, facts.server_caches),
            *light_work_warnings(metrics),
            *facts.notes,
        ),
        epoch_delta=epoch_delta(epochs),
        epoch1_vs_steady=epoch1_vs_steady(epochs, metrics.samples_per_s),
        step_times=step_times(rows, metrics.au_basis or ""),
        scale=tuple(points),
        scale_method=scale.METHOD,
        scale_queue_depth=queue.depth,
    )


def _no_allreduce(world_size: int, compute_s: float) -> float:
    return 0.0
