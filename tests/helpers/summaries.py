"""Typed cell records for tests that need a result without measuring one: a plausible cell spec and
summary, with the figures a test cares about given and the rest filled in consistently."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from iobench.analysis.cellfigures import RunFacts
from iobench.analysis.evidence import Evidence, reader_work
from iobench.analysis.ledger import ledger, totals
from iobench.analysis.metrics import pipeline_metrics
from iobench.analysis.queue import LoaderQueue
from iobench.analysis.repeats import summarize
from iobench.analysis.verdict import judge
from iobench.results.figures import (
    ACCOUNT_PARTS,
    CacheState,
    EpochFigures,
    PipelineMetrics,
    StepAlone,
    StepRow,
    Verdict,
    WallSplit,
)
from iobench.results.spec import AcceleratorSpec, CellSpec, LoaderSettings, MinMeasure, RunSettings
from iobench.results.summary import CellManifest, CellSummary, DatasetInfo, HostInfo, Stability
from loaders import StageStats


def cell_spec(cell_id: str = "disk-torch-w2", *, tier: str = "disk", workers: int = 2, **run) -> CellSpec:
    return CellSpec(
        cell_id=cell_id,
        tier={"name": tier, "kind": "local", "path": "/data"},
        loader=LoaderSettings(kind="torch", workers=workers, batch_size=64),
        accelerator=AcceleratorSpec(
            kind="emulated", type="h100", model="resnet50", demand="training", count=1
        ),
        cache="cold",
        run=RunSettings(**run),
        dataset="/data",
    )


def metrics_of(
    rows: list[StepRow],
    time_to_first_batch_s: float | None = None,
    *,
    alone: StepAlone | None = None,
    au_basis: str | None = None,
    readers_in_process: bool = False,
) -> PipelineMetrics:
    """One rank's metrics from its step rows, as a cell computes them: the ledger's measured window."""
    entries = ledger(rows, alone)
    measured = [e for e in entries if not e.warmup]
    return pipeline_metrics(
        measured,
        totals(measured),
        every_step=entries,
        time_to_first_batch_s=time_to_first_batch_s,
        alone={rows[0].rank: alone} if alone is not None else None,
        au_basis=au_basis,
        readers_in_process=readers_in_process,
    )


def judge_of(
    metrics: PipelineMetrics,
    stats: StageStats,
    *,
    workers: int,
    cores: int,
    demand: float | None = None,
    **evidence: Any,
) -> Verdict:
    """The one judge's verdict on a window's metrics and its readers' stage counters, as a cell's
    analysis asks it (analysis/cellfigures.py); ``evidence``: any other field of the Evidence."""
    work = reader_work(stats, readers=max(1, workers), workers=workers)
    return judge(
        Evidence(metrics=metrics, work=work, cores=cores, demand=demand, counters=stats.counters, **evidence)
    )


def _steady_rows(samples_per_s: float, au: float | None, steps: int) -> list[StepRow]:
    """``steps`` identical 64-sample steps that deliver ``samples_per_s`` at ``au``."""
    au = samples_per_s / 1000 if au is None else au
    step_s = 64 / samples_per_s
    return [
        StepRow(
            i, 0, False, i * step_s, (1 - au) * step_s, 0.0, au * step_s, (i + 1) * step_s, 64, 64 * 110_000
        )
        for i in range(steps)
    ]


def metrics(samples_per_s: float, *, au: float | None = None, steps: int = 10) -> PipelineMetrics:
    """Metrics computed (as a cell computes them) from ``steps`` identical 64-sample steps that
    deliver ``samples_per_s`` at ``au``: every field a new metric adds is filled in by itself."""
    return metrics_of(_steady_rows(samples_per_s, au, steps), time_to_first_batch_s=0.5)


def split(samples_per_s: float, *, au: float | None = None, steps: int = 10) -> WallSplit:
    """The wall split of the same steps as :func:`metrics`."""
    return totals(ledger(_steady_rows(samples_per_s, au, steps))).split()


def run_facts(**given: Any) -> RunFacts:
    """What a cell's analysis knows of its run besides the steps: one epoch asked for, 2 workers on
    2 cores, no demand known, no minimum window, nothing capped; ``given``: any field otherwise."""
    facts = RunFacts(
        workers=2,
        cores=2,
        demand_samples_per_s=None,
        au_basis="device",
        readers_in_process=False,
        min_measure=MinMeasure(seconds=0, steps=0),
        requested_epochs=1,
        capped=None,
    )
    return replace(facts, **given)


def epoch_figures(
    epoch: int,
    samples: int,
    *,
    wall_s: float = 1.0,
    bytes_read: int = 0,
    cache_hits: int = 0,
    cache_misses: int = 0,
    **given: Any,
) -> EpochFigures:
    """One epoch that delivered ``samples`` (and read ``bytes_read``) in ``wall_s``: its rates and
    cache hit ratio worked out from those as a cell's are (analysis/epochs.py); one step, no stall,
    no evictions and no requests, unless ``given`` (any other field of the figures) says otherwise."""
    looked_up = cache_hits + cache_misses
    figures = EpochFigures(
        epoch=epoch,
        steps=1,
        samples=samples,
        wall_s=wall_s,
        samples_per_s=samples / wall_s,
        bytes_read=bytes_read,
        bytes_per_s=bytes_read / wall_s,
        stall_fraction=0.0,
        cache_hits=cache_hits,
        cache_misses=cache_misses,
        cache_hit_ratio=cache_hits / looked_up if looked_up else None,
        cache_evictions=0,
        bytes_transferred=0,
        requests=0,
        retries=0,
    )
    return replace(figures, **given)


def wall_split(wall_s: float = 10.0, **parts: float) -> WallSplit:
    """A wall split of ``wall_s``: the ``parts`` given (fractions of it, summing to 1), every other 0."""
    assert math.isclose(sum(parts.values()), 1.0), parts
    return WallSplit(wall_s=wall_s, **(dict.fromkeys(ACCOUNT_PARTS, 0.0) | parts))


def ok_summary(
    cell_id: str,
    samples_per_s: float,
    *,
    runs: list[float] | None = None,
    bound: str = "prep",
    binding_stage: str | None = "decode",
    cell: CellSpec | None = None,
) -> CellSummary:
    """A measured cell; ``runs`` gives each repeat's samples/s (the summary's is their median)."""
    stability = None
    if runs:
        stability = Stability(samples_per_s=summarize(runs), au=summarize([r / 1000 for r in runs]))
    return CellSummary(
        status="ok",
        cell=cell or cell_spec(cell_id),
        metrics=metrics(samples_per_s),
        split=split(samples_per_s),
        verdict=Verdict(bound=bound, binding_stage=binding_stage, headline=f"{bound}-bound"),
        cache_state=CacheState("cold", "posix_fadvise(DONTNEED)", 0, 1000, 0.0, "cold", ""),
        stability=stability,
    )


def failed_summary(
    cell_id: str, error: str = "TierConfigError: gone", cell: CellSpec | None = None
) -> CellSummary:
    return CellSummary.failed(cell or cell_spec(cell_id), error)


def cell_manifest(
    summary: CellSummary, *, mean_sample_bytes: float = 110 * 1024, cpus: int = 2
) -> CellManifest:
    """The manifest of ``summary``'s cell: this host, a 1,000-sample dataset of ``mean_sample_bytes``."""
    assert summary.cache_state is not None
    return CellManifest(
        host=HostInfo("testhost", "Linux", "Test CPU", cpus, cpus, 8 * 2**30, False),
        versions={"iobench": "test"},
        cell=summary.cell,
        tier=dict(summary.cell.tier),
        cache_state=summary.cache_state,
        dataset=DatasetInfo("/data", "wds", 1000, int(1000 * mean_sample_bytes), 4, mean_sample_bytes),
        stage_names=("fetch", "decode", "augment", "collate"),
    )


def queued_steps(made: np.ndarray, queue: LoaderQueue, compute: float = 0.02) -> list[StepRow]:
    """One rank's measured steps as a loader with ``queue`` makes batches that take ``made``
    seconds each (analysis/queue.py: worker ``k mod workers``, the request for batch ``k`` sent when
    the loop took batch ``k - depth``), each stamped with when its worker began and finished it."""
    workers = max(1, queue.workers)
    free, taken, rows, t = [0.0] * workers, [], [], 0.0
    for k, m in enumerate(made):
        requested = taken[k - queue.depth] if k >= queue.depth else 0.0
        begun = max(free[k % workers], requested)
        ready = free[k % workers] = begun + float(m)
        got = max(t, ready)
        taken.append(got)
        rows.append(
            StepRow(k, 0, False, t, got - t, 0.0, compute, got + compute, 64, 0,
                    reader=k % workers, begun_s=begun, ready_s=ready)
        )  # fmt: skip
        t = got + compute
    return rows
