"""A probe's measurements as iobench's result records, written as a run directory that ``report``,
``report --html``, ``compare`` and ``recommend --results`` read.

Every conversion from the probe's raw figures (measure.py, ceilings.py, workers.py, batches.py) to
iobench's records happens here, and only here; the figures then come from iobench's one analysis
stage, as a sweep's do: ``analysis.cellfigures.analyse`` (the steps' ledger, metrics, wall split,
epochs, the window by the one window rule, the verdict by the one judge), a job's ranks through
``analysis.job.aggregate`` as a multi-rank cell's, its core budget from the host's counters the
probe read beside the job. The probe adds only what only it has: its ceilings.

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
- the two ceilings as a ``Ceilings`` record (``accelerator``: the step alone; the loader alone as
  ``fetch`` or ``prep``, by what bound it), and the differential against the probe's verdict.
"""

from __future__ import annotations

import platform
import re
import socket
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from iobench import __version__
from iobench.analysis.cellfigures import Analysis, RunFacts, analyse, budget_of
from iobench.analysis.cores import shared_ceiling
from iobench.analysis.differential import combine
from iobench.analysis.evidence import Evidence, reader_work
from iobench.analysis.job import Aggregate, RankInput, aggregate
from iobench.analysis.verdict import judge
from iobench.analysis.window import weakest
from iobench.host.cpuload import load_over
from iobench.results.figures import (
    Attribution,
    CacheState,
    Ceiling,
    Ceilings,
    Distributed,
    Interval,
    PipelineMetrics,
    RankFigures,
    StepAccount,
    StepAlone,
    StepRow,
    Verdict,
    loader_stats,
)
from iobench.results.schema import STEP_SCHEMA, account_columns
from iobench.results.spec import AcceleratorSpec, CellSpec, LoaderSettings, MinMeasure, RunSettings
from iobench.results.store import publish_cell, write_results_table
from iobench.results.summary import CellManifest, CellSummary, DatasetInfo, HostInfo, Warmup, utc_now
from loaders import StageStats
from loaders.observe import STAGES

from .measure import ProbedRank
from .outcome import Outcome
from .workers import LoaderWork

GPU_BASIS = "GPU busy (CUDA events)"
CPU_BASIS = "CPU step (the host is the device)"
CACHE_NOTE = (
    "the probe leaves the job's caches as they are: its figures are for the cache state the job ran in"
)


def cell_id(outcome: Outcome) -> str:
    return "probe-" + (re.sub(r"[^A-Za-z0-9._-]+", "-", outcome.name).strip("-") or "job")


def rows_of(run: ProbedRank, origin: float) -> list[StepRow]:
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
                **made,
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


def step_alone_of(run: ProbedRank) -> StepAlone | None:
    a = run.step_alone
    if a is None:
        return None
    return StepAlone(
        step_s=a.step_s, fastest_s=a.fastest_s, device_s=a.device_s, cpu_s=a.cpu_s or 0.0, steps=a.steps
    )


# what the probe calls a stage of a job's readers: it times the dataset's __getitem__ whole
PROBE_WORDS = {"decode": "decode/augment in the dataset"}
UNSEEN_ACTION = "time the loader alone (--ceilings) to see what it can deliver"


@dataclass(frozen=True)
class ProbedFigures:
    """One rank's figures: its rows and the analysis of them (its verdict by the one judge)."""

    run: ProbedRank
    rows: list[StepRow]
    analysis: Analysis

    @property
    def metrics(self) -> PipelineMetrics:
        return self.analysis.metrics

    def as_input(self) -> RankInput:
        """The rank as a job's figures take it (analysis/job.py)."""
        run, verdict = self.run, self.analysis.verdict
        return RankInput(
            rank=run.rank,
            local_rank=int(run.ranks.get("LOCAL_RANK", run.rank)),
            node_rank=int(run.ranks.get("GROUP_RANK", 0)),
            host=socket.gethostname(),
            rows=self.rows,
            measured_stats=stage_stats(run.work),
            epoch_stats=epoch_stats(self.rows),
            bound=verdict.bound,
            binding_stage=verdict.binding_stage,
            time_to_first_batch_s=self.metrics.time_to_first_batch_s,
            alone=step_alone_of(run),
            au_basis=self.metrics.au_basis,
            readers_in_process=run.workers == 0,
        )


def facts_of(outcome: Outcome, run: ProbedRank, cores: int, ceilings: Ceilings | None) -> RunFacts:
    """What the analysis needs to know of a probed rank besides its steps."""
    work = run.work
    return RunFacts(
        workers=run.workers,
        cores=cores,
        demand_samples_per_s=None,
        au_basis=GPU_BASIS if run.device_s else CPU_BASIS,
        readers_in_process=run.workers == 0,
        min_measure=window_rule(outcome),
        requested_epochs=len(epoch_stats(rows_of(run, run.created))),
        capped=outcome.short_because or "the job's end",
        feed=run.feed(),
        reader_busy=work.busy if work is not None else None,
        stage_words=PROBE_WORDS,
        readers_seen=work is not None and run.info.get("kind") != "dali",
        unseen=_unseen(run),
        unseen_action=UNSEEN_ACTION,
        pin_ms_per_batch=run.pin_ms_per_batch,
        ceilings=ceilings,
        split_measured=any(b is not None for b in run.batches),
    )


def window_rule(outcome: Outcome) -> MinMeasure:
    """The probe's window: its steps, or its seconds where steps are slow (analysis/window.py)."""
    return outcome.least


def _probed_rank(
    outcome: Outcome, run: ProbedRank, origin: float, cores: int, ceilings: Ceilings | None
) -> ProbedFigures:
    rows = rows_of(run, origin)
    stats = stage_stats(run.work)
    measured = [r for r in rows if not r.warmup]
    load = (
        load_over(outcome.cpu, origin + measured[0].t_start, origin + measured[-1].t_end, cores)
        if measured and len(outcome.runs) == 1
        else None
    )
    analysis = analyse(
        rows,
        facts=facts_of(outcome, run, cores, ceilings),
        epoch_stats=epoch_stats(rows),
        measured_stats=stats,
        alone=step_alone_of(run),
        time_to_first_batch_s=run.steps[0].t_return - run.created,
        load=load,
    )
    return ProbedFigures(run, rows, analysis)


def _unseen(run: ProbedRank) -> str | None:
    if run.info.get("kind") == "dali":
        return "DALI runs its pipeline in threads of its own, which the probe does not time"
    if run.work is None:
        return "no batch of this loader's readers was timed in the window (were the workers reached?)"
    return None


def ceilings_of(runs: list[ProbedRank]) -> Ceilings | None:
    """The job's ceilings: its ranks' together (they run at once); None where neither was measured."""
    accelerator = loader = None
    steps = [r.step_alone for r in runs if r.step_alone is not None]
    if steps and len(steps) == len(runs):
        accelerator = Ceiling(
            name="accelerator",
            samples_per_s=sum(a.samples_per_s for a in steps),
            samples=sum(a.samples for a in steps),
            seconds=max(a.seconds for a in steps),
            method=f"the step alone: the job's own step on its last real batches, handed back from memory "
            f"({steps[0].steps} steps timed after its readers went idle), no data wait",
            note=steps[0].note,
        )
    alone = [r.loader_alone for r in runs if r.loader_alone is not None]
    if alone and len(alone) == len(runs):
        parts = [a.part for a in alone]
        part = max(set(parts), key=parts.count)
        works = [a.work for a in alone if a.work is not None]
        ended = "; the epoch ran out before the time was up" if any(a.ended for a in alone) else ""
        loader = Ceiling(
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
    if accelerator is None and loader is None:
        return None
    prep = loader if loader is not None and loader.name == "prep" else None
    fetch = loader if loader is not None and loader.name == "fetch" else None
    return Ceilings(accelerator=accelerator, prep=prep, fetch=fetch)


def _probed_job_verdict(outcome: Outcome, ranks: list[ProbedFigures], agg: Aggregate) -> Verdict:
    """The job's verdict by the one judge over every rank's readers and the job's figures (as a
    multi-rank cell's), with each rank's own beside it."""
    lines = tuple(
        f"rank {r.run.rank}: {r.analysis.verdict.name}, {r.metrics.samples_per_s:,.0f} samples/s, "
        f"AU {r.metrics.au:.2f}, waited {100 * r.metrics.stall_fraction:.0f} %"
        for r in ranks
    )
    n = len(ranks)
    first = ranks[0]
    workers = sum(r.run.workers for r in ranks)
    origin = min(r.run.created for r in ranks)
    load = load_over(outcome.cpu, origin + agg.start, origin + agg.end, outcome.cores)
    feeds = [f for r in ranks if (f := r.run.feed()) is not None]
    seen = all(r.run.work is not None for r in ranks) and first.run.info.get("kind") != "dali"
    busy = [r.run.work.busy for r in ranks if r.run.work is not None]
    return judge(
        Evidence(
            metrics=agg.metrics,
            work=reader_work(
                agg.measured_stats,
                readers=sum(max(1, r.run.workers) for r in ranks),
                workers=workers,
                busy=statistics.fmean(busy) if busy else None,
                words=PROBE_WORDS,
            )
            if seen
            else None,
            cores=outcome.cores,
            accelerators=n,
            trainers=n,
            split=agg.split if all(any(b is not None for b in r.run.batches) for r in ranks) else None,
            budget=budget_of(list(agg.window), load, workers == 0, agg.end - agg.start),
            feed=(statistics.median(f[0] for f in feeds), feeds[0][1]) if feeds else None,
            window=weakest([r.analysis.window for r in ranks]),
            least=window_rule(outcome),
            ranks=(
                f"the job: {agg.metrics.samples_per_s:,.0f} samples/s over {n} ranks, AU {agg.metrics.au:.2f}",
                *lines,
            ),
            ceilings=ceilings_of([r.run for r in ranks]) if outcome.ceilings else None,
            unseen=_unseen(first.run),
            unseen_action=UNSEEN_ACTION,
        )
    )


def _distributed(agg: Aggregate, n: int) -> Distributed:
    host = socket.gethostname()
    return Distributed(
        world_size=n,
        nodes=1,
        ranks_per_node=n,
        hosts=(host,),
        interval=Interval(agg.start, agg.end, agg.end - agg.start),
        alignment_s=0.0,
        samples_per_s=agg.metrics.samples_per_s,
        bytes_per_s=agg.metrics.bytes_per_s,
        skew=agg.skew,
        slowest_rank=agg.slowest.rank,
        slowest_host=host,
        slowest_samples_per_s=agg.slowest.samples_per_s,
        sync="none",  # the probe does not see the job's collectives: its own step holds them
        steps=agg.steps,
        data_wait_fraction=agg.metrics.stall_fraction,
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
            min_measure=outcome.least,
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


def _gpu(outcome: Outcome, run: ProbedRank) -> float | None:
    """NVML's utilisation over the window, mean over the GPUs and the samples."""
    start, end = run.window[0].t_start, run.window[-1].t_end
    values = [u for t, u in outcome.gpu if start <= t <= end]
    return statistics.fmean(values) if values else None


LONGER = (
    "run the job longer (more epochs or steps), or ask for a shorter window (a lower --steps or --seconds)"
)


def _run_notes(outcome: Outcome, runs: list[ProbedRank]) -> tuple[str, ...]:
    """What the ceilings could not be, and why: every ceiling asked for and not measured is said."""
    if not outcome.ceilings:
        return ()
    notes = []
    if not all(r.step_alone for r in runs):
        notes.append(
            f"the step alone was not measured: the job ended before its window and the replay did; {LONGER}"
        )
    else:
        notes.append(
            "the step alone ran on the job's last batches handed back again: a step that changes its batch in "
            "place changed the same one again"
        )
        notes.extend(
            f"the step alone: {r.step_alone.note}" for r in runs[:1] if r.step_alone and r.step_alone.note
        )
    if not all(r.loader_alone for r in runs):
        why = next((r.skipped for r in runs if r.skipped), None)
        notes.append(
            f"the loader alone was not measured: {why}; {LONGER}"
            if why
            else f"the loader alone was not measured: the job ended before it ran; {LONGER}"
        )
    return tuple(notes)


def summary_of(outcome: Outcome) -> tuple[CellSummary, list[tuple[StepRow, StepAccount]]]:
    spec = _spec(outcome)
    runs = [r for r in outcome.runs if r.window]
    if not runs:
        return CellSummary.failed(spec, outcome.seen, started_at=outcome.started_at), []
    cores = max(1, outcome.cores // len(runs))
    origin = min(r.created for r in runs)
    ceilings = ceilings_of(runs) if outcome.ceilings else None
    ranks = [_probed_rank(outcome, run, origin, cores, ceilings if len(runs) == 1 else None) for run in runs]
    first = ranks[0]
    distributed: Distributed | None = None
    rank_records: tuple[RankFigures, ...] = ()
    if len(ranks) == 1:
        a = first.analysis
        metrics, split, epochs, verdict, window = a.metrics, a.split, a.epochs, a.verdict, a.window
    else:
        agg = aggregate([r.as_input() for r in ranks], synchronous=False)
        metrics, split, epochs = agg.metrics, agg.split, agg.epochs
        verdict, window = (
            _probed_job_verdict(outcome, ranks, agg),
            weakest([r.analysis.window for r in ranks]),
        )
        distributed, rank_records = _distributed(agg, len(ranks)), tuple(agg.ranks)
    summary = CellSummary(
        status="ok",
        cell=spec,
        metrics=metrics,
        verdict=verdict,
        **_stage_figures(first.run.work),
        cache_state=_cache_state(),
        epochs_completed=max(0, len(epochs) - 1),
        epochs=epochs,
        warmup=Warmup(steps=first.run.warmup, method=first.run.warmup_method),
        window=window,
        ceilings=ceilings,
        attribution=_attribution(verdict, ceilings.rates() if ceilings else None, metrics, outcome.cores),
        warnings=tuple(outcome.notes) + _run_notes(outcome, runs),
        split=split,
        **_reads(runs, metrics.wall_s),
        gpu_utilization_pct=_gpu(outcome, first.run),
        consumer={
            "kind": "the job's own step",
            "command": list(outcome.command),
            "exit_code": outcome.exit_code,
            "probe_cores": outcome.probe_cores,
        },
        distributed=distributed,
        ranks=rank_records,
        started_at=outcome.started_at,
        finished_at=utc_now(),
    )
    pairs = [(row, entry) for r in ranks for row, entry in zip(r.rows, r.analysis.entries, strict=True)]
    return summary, pairs


def _stage_figures(work: LoaderWork | None) -> dict:
    stats = stage_stats(work)
    return dict(
        stage_ms_per_sample=stats.per_sample_ms("wall") if work else {},
        stage_cpu_ms_per_sample=stats.per_sample_ms("cpu") if work else {},
        loader_stats=loader_stats(stats),
        loader_stats_all_steps=loader_stats(stats),
    )


def _reads(runs: list[ProbedRank], seconds: float) -> dict:
    works = [r.work for r in runs if r.work is not None]
    if not works or seconds <= 0:
        return {}
    return dict(
        device_read_bytes_per_s=sum(w.read_bytes for w in works) / seconds,
        read_call_bytes_per_s=sum(w.rchar for w in works) / seconds,
        cell_device_read_bytes=sum(r.device_read_bytes for r in runs),
    )


def _attribution(
    verdict: Verdict, rates: dict[str, float] | None, metrics: PipelineMetrics, cores: int
) -> Attribution | None:
    """The two ceilings against the one judge's verdict, with what the cores feed where the loader
    and the step share them (analysis/cores.py, shared_ceiling): each ceiling alone ignores the other."""
    if not rates or "accelerator" not in rates or len(rates) != 2 or verdict.bound == "unknown":
        return None
    shared = shared_ceiling(verdict.cores, verdict.budget, cores) if verdict.cores is not None else None
    return combine(
        {**rates, **({"cores": shared} if shared else {})},
        verdict,
        measured_samples_per_s=metrics.samples_per_s,
        au=metrics.au,
    )


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
