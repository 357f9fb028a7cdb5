"""A probe's measurements as iobench's result records, written as a run directory that ``report``,
``report --html``, ``compare`` and ``recommend --results`` read.

Every conversion from the probe's raw figures (measure.py, ceilings.py, workers.py, batches.py) to
iobench's records happens here, and only here; the figures then come from iobench's one analysis
stage (``analysis.cellfigures.analyse``: the steps' ledger, metrics, wall split, epochs, window), as
a sweep's do. The probe adds its own verdict (verdict.py), its window rule and its ceilings.

- one ``StepRow`` per step of a rank's main stream, with the step loop's meanings
  (cell/steps/steploop.py): ``wait_s`` blocked in next() (an epoch's first step from its ``iter()``, the
  iterator's building in ``open_s``); ``h2d_s`` the copies to the device inside the step;
  ``compute_s`` the rest of the step's host time, from the batch in hand to the loop's next call;
  ``device_s`` the CUDA events' span, or on the CPU the step itself (the host is the device);
  ``trainer_cpu_s`` the process's CPU from one call to the next; the batch's making where it was
  matched (batches.py): ``reader``, ``begun_s``, ``ready_s``, and per stage ``fetch_wait_s`` (its
  samples' time blocked in the dataset), ``decode_s`` (their CPU and wait for a core there:
  decoding and augmenting, which the probe cannot part), ``augment_s`` 0, ``collate_s``,
  ``reader_cpu_s``; ``bytes_read`` what its reader's read calls returned for it (unmatched: what
  the readers read in the step's time);
- the readers' time over the window as the same four stages (the analysis splits the wait of an
  unmatched step by them);
- the two ceilings as ``Ceiling`` records (``accelerator``: the step alone; the loader alone as
  ``fetch`` or ``prep``, by what bound it), and the differential against the probe's verdict.
"""

from __future__ import annotations

import platform
import re
import socket
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa

from iobench import __version__
from iobench.analysis.cellfigures import Analysis, RunFacts, analyse
from iobench.analysis.epochs import epoch_figures
from iobench.analysis.ledger import clipped, totals
from iobench.analysis.metrics import pipeline_metrics
from iobench.analysis.window import weakest
from iobench.results.figures import (
    Attribution,
    CacheState,
    Ceiling,
    Distributed,
    Interval,
    LoaderStats,
    PipelineMetrics,
    RankFigures,
    StepAccount,
    StepAlone,
    StepRow,
    Verdict,
    WallSplit,
    Window,
)
from iobench.results.schema import STEP_SCHEMA, account_columns
from iobench.results.spec import AcceleratorSpec, CellSpec, LoaderSettings, MinMeasure, RunSettings
from iobench.results.store import publish_cell, write_results_table
from iobench.results.summary import CellManifest, CellSummary, DatasetInfo, HostInfo, Warmup, utc_now
from loaders import StageStats
from loaders.observe import STAGES

from .measure import RankRun
from .outcome import Outcome
from .verdict import ceilings_said, differential, judge
from .workers import LoaderWork

GPU_BASIS = "GPU busy (CUDA events)"
CPU_BASIS = "CPU step (the host is the device)"
CACHE_NOTE = (
    "the probe leaves the job's caches as they are: its figures are for the cache state the job ran in"
)


def cell_id(outcome: Outcome) -> str:
    return "probe-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", outcome.name).strip("-") or "job")


def rows_of(run: RankRun, origin: float) -> list[StepRow]:
    """The rank's steps as the step loop records them, on a clock from ``origin``."""
    on_gpu = bool(run.device_s)
    rows = []
    for i, s in enumerate(run.steps):
        h2d, f = run.h2d_s[i], run.batches[i]
        compute = max(0.0, s.host_s - h2d)
        made = {}
        if f is not None:
            made = dict(
                reader=max(0, int(f.worker)),
                begun_s=f.t0 - origin,
                ready_s=f.t1 - origin,
                fetch_wait_s=max(0.0, f.get_wall - f.get_cpu - f.get_runq),
                decode_s=f.get_cpu + f.get_runq,
                augment_s=0.0,
                collate_s=f.collate_wall,
                reader_cpu_s=f.get_cpu + f.collate_cpu,
            )
        rows.append(
            StepRow(
                step=s.index,
                epoch=s.epoch,
                warmup=i < run.warmup,
                t_start=s.t_start - origin,
                wait_s=s.wait_s,
                h2d_s=h2d,
                compute_s=compute,
                t_end=s.t_end - origin,
                samples=s.samples,
                bytes_read=run.bytes_read[i],
                rank=run.rank,
                device_s=run.device_s.get(s.index) if on_gpu else compute,
                trainer_cpu_s=s.cpu_s,
                open_s=s.open_s,
                **made,  # type: ignore[arg-type]
            )
        )
    return rows


def stage_stats(work: LoaderWork | None) -> StageStats:
    """The readers' time over the window as a loader's stage counters."""
    stats = StageStats()
    if work is None:
        return stats
    stats.samples, stats.bytes_read = work.samples, work.rchar
    stats.add_time("fetch", max(0.0, work.get_wall_s - work.get_cpu_s - work.get_runq_s), 0.0)
    stats.add_time("decode", work.get_cpu_s + work.get_runq_s, work.get_cpu_s)
    stats.add_time("collate", work.collate_wall_s, work.collate_cpu_s)
    return stats


def epoch_stats(rows: list[StepRow]) -> list[StageStats]:
    """Per epoch, the samples and bytes its steps took (the probe sees no storage counters)."""
    out: dict[int, StageStats] = defaultdict(StageStats)
    for r in rows:
        out[r.epoch].samples += r.samples
        out[r.epoch].bytes_read += r.bytes_read
    return [out[e] for e in range(max(out) + 1)] if out else []


def step_alone_of(run: RankRun) -> StepAlone | None:
    a = run.step_alone
    if a is None:
        return None
    return StepAlone(
        step_s=a.step_s, fastest_s=a.fastest_s, device_s=a.device_s, cpu_s=a.cpu_s or 0.0, steps=a.steps
    )


def loader_stats(stats: StageStats) -> LoaderStats:
    return LoaderStats(
        samples=stats.samples, bytes_read=stats.bytes_read, wall_s=dict(stats.wall_s), cpu_s=dict(stats.cpu_s)
    )


@dataclass(frozen=True)
class RankFiguresOf:
    """One rank's figures: its rows, the analysis of them and the probe's verdict."""

    run: RankRun
    rows: list[StepRow]
    analysis: Analysis
    verdict: Verdict

    @property
    def metrics(self) -> PipelineMetrics:
        return self.analysis.metrics


def rank_figures(outcome: Outcome, run: RankRun, origin: float, cores: int) -> RankFiguresOf:
    rows = rows_of(run, origin)
    stats = stage_stats(run.work)
    epochs = epoch_stats(rows)
    analysis = analyse(
        rows,
        facts=RunFacts(
            workers=run.workers,
            cores=cores,
            demand_samples_per_s=None,
            au_basis=GPU_BASIS if run.device_s else CPU_BASIS,
            readers_in_process=run.workers == 0,
            min_measure=MinMeasure(seconds=outcome.limits.seconds, steps=outcome.limits.steps),
            requested_epochs=len(epochs),
            capped=None,
        ),
        epoch_stats=epochs,
        measured_stats=stats,
        alone=step_alone_of(run),
        time_to_first_batch_s=run.steps[0].t_return - run.created,
    )
    window = window_of(outcome, analysis.window)
    analysis = replace(analysis, window=window)
    verdict = judge(
        analysis.metrics,
        run.work,
        cores=cores,
        workers=run.workers,
        split=analysis.split if any(b is not None for b in run.batches) else None,
        unseen=_unseen(run),
        pin_ms_per_batch=run.pin_ms_per_batch,
    )
    return RankFiguresOf(run, rows, analysis, verdict)


def window_of(outcome: Outcome, measured: Window) -> Window:
    """The analysis's window under the probe's rule (its steps, or its seconds when steps are slow)."""
    met = outcome.limits.done(measured.steps, measured.seconds)
    return replace(measured, met=met, short_because=None if met else outcome.short_because or "the job's end")


def _short_said(verdict: Verdict, window: Window, outcome: Outcome) -> Verdict:
    if window.met:
        return verdict
    said = (
        f"measured only {window.steps} steps over {window.seconds:.2f} s after warm-up (the probe asks "
        f"{outcome.limits.steps} steps or {outcome.limits.seconds:g} s), stopped by {window.short_because}: "
        "treat the figures as indicative"
    )
    return replace(verdict, headline=f"{verdict.headline} [{said}]")


def _unseen(run: RankRun) -> str | None:
    if run.info.get("kind") == "dali":
        return "DALI runs its pipeline in threads of its own, which the probe does not time"
    if run.work is None:
        return "no batch of this loader's readers was timed in the window (were the workers reached?)"
    return None


def ceilings_of(runs: list[RankRun]) -> dict[str, Ceiling]:
    """The job's ceilings: its ranks' together (they run at once)."""
    out: dict[str, Ceiling] = {}
    steps = [r.step_alone for r in runs if r.step_alone is not None]
    if steps and len(steps) == len(runs):
        out["accelerator"] = Ceiling(
            name="accelerator",
            samples_per_s=sum(a.samples_per_s for a in steps),
            samples=sum(a.samples for a in steps),
            seconds=max(a.seconds for a in steps),
            method=f"the step alone: the job's own step on its last real batches, handed back from memory "
            f"({steps[0].steps} steps timed), no data wait",
        )
    alone = [r.loader_alone for r in runs if r.loader_alone is not None]
    if alone and len(alone) == len(runs):
        parts = [a.part for a in alone]
        part = max(set(parts), key=parts.count)
        works = [a.work for a in alone if a.work is not None]
        ended = "; the epoch ran out before the time was up" if any(a.ended for a in alone) else ""
        out[part] = Ceiling(
            name=part,
            samples_per_s=sum(a.samples_per_s for a in alone),
            samples=sum(a.samples for a in alone),
            seconds=max(a.seconds for a in alone),
            bytes_per_s=sum(w.rchar / w.seconds for w in works if w.seconds > 0) if works else None,
            method="the loader alone: the job's own DataLoader drained with nothing consuming, after the "
            f"{alone[0].untimed} batch(es) its workers had queued",
            note=f"its readers were mostly {'blocked (storage)' if part == 'fetch' else 'on the CPU'}, so this "
            f"is the {part} ceiling{ended}",
        )
    return out


def job_figures(ranks: list[RankFiguresOf]) -> tuple[PipelineMetrics, WallSplit, tuple, Interval]:
    """The job over the interval every rank measured (its ranks' accounts clipped to it), as a
    sweep's multi-rank cell: rates summed, AU and stall over every rank's time."""
    measured = [[e for e in r.analysis.entries if not e.warmup] for r in ranks]
    start = max(m[0].start_s for m in measured)
    end = min(m[-1].end_s for m in measured)
    if end <= start:
        raise ValueError("the ranks' measured windows do not overlap: measure more steps (--steps)")
    inside: list[StepAccount] = [c for m in measured for e in m if (c := clipped(e, start, end)) is not None]
    job = totals(inside, span_s=len(ranks) * (end - start))
    every = [e for r in ranks for e in r.analysis.entries]
    metrics = pipeline_metrics(
        inside,
        job,
        ranks=len(ranks),
        every_step=every,
        time_to_first_batch_s=max(r.metrics.time_to_first_batch_s or 0.0 for r in ranks),
        alone={r.run.rank: a for r in ranks if (a := step_alone_of(r.run)) is not None},
        au_basis=ranks[0].metrics.au_basis,
        readers_in_process=ranks[0].run.workers == 0,
        waits=[e.wait for m in measured for e in m if start <= e.end_s <= end],
    )
    stats = [epoch_stats(r.rows) for r in ranks]
    merged = []
    for epoch in range(max(len(s) for s in stats)):
        total = StageStats()
        for s in stats:
            if epoch < len(s):
                total.merge(s[epoch])
        merged.append(total)
    return metrics, job.split(), epoch_figures(every, inside, merged), Interval(start, end, end - start)


def job_verdict(ranks: list[RankFiguresOf], metrics: PipelineMetrics) -> Verdict:
    """The job waits for its slowest rank at every step: the verdict of the rank that waited most
    for its own data, with every rank's beside it."""
    binding = max(ranks, key=lambda r: r.metrics.stall_fraction)
    lines = [
        f"rank {r.run.rank}: {r.verdict.name}, {r.metrics.samples_per_s:,.0f} samples/s, AU {r.metrics.au:.2f}, "
        f"waited {100 * r.metrics.stall_fraction:.0f} %"
        for r in ranks
    ]
    v = binding.verdict
    return replace(
        v,
        headline=f"{v.headline} (rank {binding.run.rank}, which waited most for its data; the job waits for it)",
        evidence=(
            f"the job: {metrics.samples_per_s:,.0f} samples/s over {len(ranks)} ranks, AU {metrics.au:.2f}",
            *lines,
            *v.evidence,
        ),
    )


def _rank_record(r: RankFiguresOf) -> RankFigures:
    m, run = r.metrics, r.run
    return RankFigures(
        rank=run.rank,
        local_rank=int(run.ranks.get("LOCAL_RANK", run.rank)),
        node_rank=int(run.ranks.get("GROUP_RANK", 0)),
        host=socket.gethostname(),
        steps=m.steps,
        samples=m.samples,
        bytes_read=m.bytes_read,
        samples_per_s=m.samples_per_s,
        bytes_per_s=m.bytes_per_s,
        wait_s=m.wait_s,
        compute_s=m.compute_s,
        au=m.au,
        stall_fraction=m.stall_fraction,
        wait_p99_ms=m.wait_p99_ms,
        warmup_steps=run.warmup,
        verdict=r.verdict.bound,
        binding_stage=r.verdict.binding_stage,
        cache=None,
    )


def _distributed(ranks: list[RankFiguresOf], metrics: PipelineMetrics, interval: Interval) -> Distributed:
    rates = [r.metrics.samples_per_s for r in ranks]
    slowest = min(range(len(ranks)), key=rates.__getitem__)
    host = socket.gethostname()
    return Distributed(
        world_size=len(ranks),
        nodes=1,
        ranks_per_node=len(ranks),
        hosts=(host,),
        interval=interval,
        alignment_s=0.0,
        samples_per_s=metrics.samples_per_s,
        bytes_per_s=metrics.bytes_per_s,
        skew=max(rates) / min(rates) if min(rates) > 0 else None,
        slowest_rank=ranks[slowest].run.rank,
        slowest_host=host,
        slowest_samples_per_s=rates[slowest],
        sync="none",  # the probe does not see the job's collectives: its own step holds them
        steps=metrics.steps,
        data_wait_fraction=metrics.stall_fraction,
    )


def _spec(outcome: Outcome) -> CellSpec:
    info = outcome.runs[0].info if outcome.runs else {}
    options = {k: v for k, v in info.items() if k not in ("batch_size", "workers", "prefetch_factor", "root")}
    loader = LoaderSettings(
        kind=f"{info.get('kind', 'torch')}-job",
        workers=int(info.get("workers") or 0),
        batch_size=int(info.get("batch_size") or 0),
        prefetch=int(info.get("prefetch_factor") or 0),
        shuffle_buffer=0,
        layout="shards" if info.get("iterable") else "objects",
        options=options,
    )
    world = max(1, len(outcome.runs))
    return CellSpec(
        cell_id=cell_id(outcome),
        tier={
            "kind": "job",
            "name": "the job's own store",
            **({"path": info["root"]} if info.get("root") else {}),
        },
        loader=loader,
        accelerator=AcceleratorSpec(kind="torch", type=None, model=outcome.name, demand="training", count=1),
        cache="as-is",
        run=RunSettings(
            warmup_steps="auto",
            ranks_per_node=world,
            sync="none" if world == 1 else "allreduce",
            diagnose=outcome.ceilings,
            min_measure=MinMeasure(seconds=outcome.limits.seconds, steps=outcome.limits.steps),
        ),
        dataset=info.get("root") or "",
    )


def _cache_state() -> CacheState:
    return CacheState(
        requested="as-is",
        method="none",
        resident_bytes_before=None,
        total_bytes=0,
        resident_fraction_before=None,
        achieved="unknown",
        note=CACHE_NOTE,
    )


def _gpu(outcome: Outcome, run: RankRun) -> float | None:
    """NVML's utilisation over the window, mean over the GPUs and the samples."""
    start, end = run.window[0].t_start, run.window[-1].t_end
    values = [u for t, u in outcome.gpu if start <= t <= end]
    return statistics.fmean(values) if values else None


def _run_notes(outcome: Outcome, runs: list[RankRun]) -> tuple[str, ...]:
    notes = []
    if outcome.ceilings and not any(r.step_alone for r in runs):
        notes.append("ceilings asked for but not measured: the job ended before its window did")
    if outcome.ceilings and any(r.step_alone for r in runs):
        notes.append(
            "the step alone ran on the job's last batches handed back again: a step that changes its batch in "
            "place changed the same one again"
        )
    return tuple(notes)


def summary_of(outcome: Outcome) -> tuple[CellSummary, list[tuple[StepRow, StepAccount]]]:
    spec = _spec(outcome)
    runs = [r for r in outcome.runs if r.window]
    if not runs:
        return CellSummary.failed(spec, outcome.seen, started_at=outcome.started_at), []
    cores = max(1, outcome.cores // len(runs))
    origin = min(r.created for r in runs)
    ranks = [rank_figures(outcome, run, origin, cores) for run in runs]
    first = ranks[0]
    if len(ranks) == 1:
        metrics, split, epochs = first.metrics, first.analysis.split, first.analysis.epochs
        verdict, window, distributed = first.verdict, first.analysis.window, None
    else:
        metrics, split, epochs, interval = job_figures(ranks)
        verdict, window = job_verdict(ranks, metrics), weakest([r.analysis.window for r in ranks])
        distributed = _distributed(ranks, metrics, interval)
    verdict = _short_said(verdict, window, outcome)
    ceilings = ceilings_of(runs) if outcome.ceilings else {}
    attribution: Attribution | None = None
    if "accelerator" in ceilings and len(ceilings) == 2:
        rates = {k: c.samples_per_s for k, c in ceilings.items()}
        if verdict.bound == "unknown":  # no stage timers to agree or disagree: the ceilings say it alone
            verdict = ceilings_said(verdict, rates)
        else:
            attribution = differential(verdict, rates, metrics)
    works = [r.work for r in runs if r.work is not None]
    seconds = metrics.wall_s
    stats = stage_stats(first.run.work)
    summary = CellSummary(
        status="ok",
        cell=spec,
        metrics=metrics,
        verdict=verdict,
        stage_ms_per_sample=stats.per_sample_ms("wall") if first.run.work else {},
        stage_cpu_ms_per_sample=stats.per_sample_ms("cpu") if first.run.work else {},
        loader_stats=loader_stats(stats),
        loader_stats_all_steps=loader_stats(stats),
        cache_state=_cache_state(),
        epochs_completed=max(0, len(epochs) - 1),
        epochs=epochs,
        warmup=Warmup(steps=first.run.warmup, method=first.run.warmup_method),
        window=window,
        ceilings=ceilings or None,
        attribution=attribution,
        warnings=tuple(outcome.notes) + _run_notes(outcome, runs),
        split=split,
        device_read_bytes_per_s=sum(w.read_bytes for w in works) / seconds if works and seconds > 0 else None,
        read_call_bytes_per_s=sum(w.rchar for w in works) / seconds if works and seconds > 0 else None,
        cell_device_read_bytes=sum(r.device_read_bytes for r in runs) if works else None,
        gpu_utilization_pct=_gpu(outcome, first.run),
        consumer={
            "kind": "the job's own step",
            "command": list(outcome.command),
            "exit_code": outcome.exit_code,
            "probe_cores": outcome.probe_cores,
        },
        distributed=distributed,
        ranks=tuple(_rank_record(r) for r in ranks) if len(ranks) > 1 else (),
        started_at=outcome.started_at,
        finished_at=utc_now(),
    )
    pairs = [(row, entry) for r in ranks for row, entry in zip(r.rows, r.analysis.entries, strict=True)]
    return summary, pairs


def _manifest(outcome: Outcome, summary: CellSummary) -> CellManifest:
    run = outcome.runs[0]
    work = run.work
    return CellManifest(
        host=HostInfo.here(cuda=outcome.cuda, usable_cpus=outcome.cores),
        versions={
            "iobench": __version__,
            "python": platform.python_version(),
            **({"torch": outcome.torch_version} if outcome.torch_version else {}),
        },
        cell=summary.cell,
        tier={"kind": "job", "description": "the job's own store, as its loader met it"},
        cache_state=summary.cache_state or _cache_state(),
        dataset=DatasetInfo(
            location=run.info.get("root") or "",
            format="the job's own",
            num_samples=int(run.info.get("length") or 0),
            total_bytes=0,
            shards=0,
            mean_sample_bytes=work.bytes_per_sample if work is not None else 0.0,
        ),
        stage_names=STAGES,
    )


def publish(out: Path, outcome: Outcome) -> CellSummary:
    """Write the probe's cell into the run directory ``out`` and rebuild its results.parquet."""
    summary, pairs = summary_of(outcome)
    files: dict[str, object] = {"summary.json": summary}
    if summary.ok:
        files["manifest.json"] = _manifest(outcome, summary)
        files["steps.parquet"] = pa.Table.from_pylist(
            [{"cell_id": summary.cell_id, **row.__dict__, **account_columns(entry)} for row, entry in pairs],
            schema=STEP_SCHEMA,
        )
    publish_cell(out, summary.cell_id, files)
    write_results_table(out)
    return summary
