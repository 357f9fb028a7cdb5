"""One cell on one rank of a torchrun job (the sweep launches it through torchrun.py):

    torchrun --standalone --nproc-per-node N -m iobench.cell.entry.rank CELL.json RUN_DIR

Each rank builds its own loader over its share of the shards (the contract's rank split: disjoint,
covering) and runs its own step loop; barriers start the loaders together (measure.py). Rank 0
gathers every rank's steps, writes the cell's one result over the interval all ranks measured
(rankmetrics.py), and sends the summary back, so the first rank on every other node records the
same summary in its own node's run directory and a resumed sweep agrees on every node.
"""

from __future__ import annotations

import os
import socket
import sys
import traceback
from pathlib import Path

import torch

from iobench.accelerators.consumers import make_consumer
from iobench.analysis import window
from iobench.analysis.cellfigures import Analysis, analyse_cell, budget_of
from iobench.analysis.evidence import ClientFacts, Evidence, SyncFacts, reader_work
from iobench.analysis.job import Aggregate, aggregate
from iobench.analysis.losses import sample_loss
from iobench.analysis.verdict import judge
from iobench.cell.entry.rankmetrics import RankRun, merged_log
from iobench.cell.entry.shared import cell_arguments, setup_facts, warmup_method
from iobench.cell.files import CellFiles, JobFigures, cell_files
from iobench.cell.inputs import CellInputs, cell_inputs
from iobench.cell.lifeline import die_with_launcher
from iobench.cell.measure import measure
from iobench.cell.protocol import LIVE_ENV
from iobench.cell.ranks.allreduce import allreduce_model
from iobench.cell.ranks.distributed import Ranks, end_group, start_group, write_rank_error
from iobench.cell.records import Measurement
from iobench.host.cores import usable_cores
from iobench.host.cpuload import HostLoad
from iobench.results.figures import Distributed, Interval, SampleLoss, Verdict, Window, loader_stats
from iobench.results.spec import AcceleratorSpec, CellSpec
from iobench.results.store import SUMMARY_NAME, publish_cell
from iobench.results.summary import CellSummary, utc_now
from loaders.registry import backend


def _consumer(acc: AcceleratorSpec, batch_size: int, ranks: Ranks):
    """A real model trains on this rank's own GPU (local rank = device index)."""
    if acc.kind == "torch" and torch.cuda.is_available():
        torch.cuda.set_device(ranks.local_rank)
        return make_consumer(acc, batch_size, device=f"cuda:{ranks.local_rank}")
    return make_consumer(acc, batch_size, rank=ranks.rank)


def _rank_run(m: Measurement, ranks: Ranks, cores: int, cell: CellSpec) -> RankRun:
    run, run_loader = cell.run, cell.loader
    return RankRun(
        rank=ranks.rank,
        local_rank=ranks.local_rank,
        node_rank=ranks.node_rank,
        host=socket.gethostname(),
        cores=cores,
        log=m.log,
        verdict=m.verdict,
        warmup_method=warmup_method(m, run),
        released_at=m.released_at,
        window=m.window,
        cache_state=m.cache_state,
        alone=m.alone,
        au_basis=m.metrics.au_basis,
        readers_in_process=backend(run_loader.kind).readers_in_process(
            run_loader.options, run_loader.workers
        ),
    )


def job_verdict(
    agg: Aggregate,
    runs: list[RankRun],
    cell: CellSpec,
    demand_per_rank: float | None,
    *,
    client: ClientFacts | None = None,
    load: HostLoad | None = None,
    job_window: Window | None = None,
    loss: SampleLoss | None = None,
) -> Verdict:
    """The job's verdict by the one judge: every rank's readers, cores and accelerators together
    against the job's figures, with the spread over the ranks as evidence; in a synchronous job, also
    whether the ranks lost more to waiting for the slowest (or to the all-reduce) than to their own
    data. ``load``: this host's over the interval, where every rank ran here (the core budget)."""
    n = len(runs)
    slow = agg.slowest
    skew = f"{agg.skew:.2f}" if agg.skew is not None else "unbounded (a rank delivered nothing)"
    said = (
        f"{n} ranks on {len({run.host for run in runs})} host(s), over the {agg.end - agg.start:.2f} s all of "
        f"them measured: {agg.metrics.samples_per_s:,.0f} samples/s together; skew {skew} (fastest rank / "
        f"slowest); slowest rank {slow.rank} on {slow.host} at {slow.samples_per_s:,.0f} samples/s, "
        f"AU {slow.au:.2f}, its own verdict {slow.verdict}"
    )
    in_process = all(run.readers_in_process for run in runs)
    return judge(
        Evidence(
            metrics=agg.metrics,
            work=reader_work(
                agg.measured_stats,
                readers=n * cell.loader.readers,
                workers=n * cell.loader.workers,
                wall_s=agg.metrics.wall_s,
            ),
            cores=sum(run.cores for run in runs),
            demand=demand_per_rank * n if demand_per_rank else None,
            accelerators=n * cell.accelerator.count,
            trainers=n,
            split=agg.split,
            budget=budget_of(list(agg.window), load, in_process, agg.end - agg.start),
            client=client,
            counters=agg.measured_stats.counters,
            window=job_window,
            least=cell.run.min_measure,
            sync=_sync_facts(agg, runs, cell) if agg.synchronous else None,
            ranks=(said,),
            loss=loss,
        )
    )


def _sync_facts(agg: Aggregate, runs: list[RankRun], cell: CellSpec) -> SyncFacts:
    slow = agg.slowest
    wall = agg.end - agg.start
    own = next(run for run in runs if run.rank == slow.rank)
    stage = f" ({slow.binding_stage})" if slow.binding_stage else ""
    why = (
        f"rank {slow.rank} on {slow.host} waited {100 * slow.wait_s / wall:.0f} % of the interval for its own "
        f"batches (p99 {slow.wait_p99_ms or 0:.0f} ms) and {100 * slow.peer_wait_s / wall:.0f} % for its peers; "
        f"its own verdict {slow.verdict}-bound{stage} reading tier {cell.tier_name}: {own.verdict.headline}"
    )
    return SyncFacts(
        data_wait=agg.metrics.stall_fraction,
        peer_wait=agg.peer_wait_fraction,
        allreduce=agg.allreduce_fraction,
        straggler_cost=agg.straggler_cost,
        slowest=why,
        fabric=cell.run.interconnect.name if cell.run.interconnect else "no fabric",
    )


def _cell_files(
    inputs: CellInputs, mine: list[Measurement], gathered: list[list[RankRun]], started: str
) -> CellFiles:
    """Rank 0: the cell's files from every repeat's gathered runs."""
    cell, consumer = inputs.cell, inputs.consumer
    run = cell.run
    aggs = [aggregate([r.as_input() for r in runs], synchronous=run.sync != "none") for runs in gathered]
    merged = [_job_measurement(a, runs, m, inputs) for a, runs, m in zip(aggs, gathered, mine, strict=True)]
    figures = analyse_cell(merged, setup_facts(inputs))
    agg, runs = aggs[figures.chosen], gathered[figures.chosen]
    methods = sorted({r.warmup_method for r in runs})
    return cell_files(
        inputs,
        merged,
        figures,
        warmup=f"per rank ({'; '.join(methods)}); the common interval starts where the last rank's ends",
        started=started,
        job=JobFigures(
            distributed=_distributed(agg, runs, cell, consumer),
            ranks=tuple(agg.ranks),
            one_host=run.nodes == 1,
        ),
    )


def _job_measurement(
    agg: Aggregate, runs: list[RankRun], mine: Measurement, inputs: CellInputs
) -> Measurement:
    """One repeat of the job as one measurement: the ranks' figures together, this host's cache state
    and telemetry (the other hosts' are in the rank rows)."""
    cell = inputs.cell
    job_window = window.weakest([r.window for r in runs if r.window is not None])
    log = merged_log(runs, agg.start, agg.end)
    start, end = log.measure_start, log.measure_end
    assert start is not None and end is not None  # merged_log sets the job's window
    # this host's counters say what the job did only where every rank ran on it
    load = mine.telemetry.load(start, end, sum(run.cores for run in runs)) if cell.run.nodes == 1 else None
    loss = sample_loss(agg.epochs, log.epochs_completed, loader_stats(log.all_stats))
    verdict = job_verdict(
        agg,
        runs,
        cell,
        inputs.consumer.demand_samples_per_s,
        client=inputs.client,
        load=load,
        job_window=job_window,
        loss=loss,
    )
    analysis = Analysis(
        entries=agg.entries,
        metrics=agg.metrics,
        split=agg.split,
        epochs=agg.epochs,
        window=job_window,
        verdict=verdict,
        loss=loss,
    )
    return Measurement(
        log=log,
        analysis=analysis,
        cache_state=mine.cache_state,
        telemetry=mine.telemetry,
        steady=None,
        checkpoint=mine.checkpoint,  # every rank's saves and restores, gathered on rank 0 (its steps' cost)
    )


def _distributed(agg: Aggregate, runs: list[RankRun], cell: CellSpec, consumer) -> Distributed:
    run = cell.run
    model = allreduce_model(run, cell.accelerator, consumer)
    return Distributed(
        world_size=len(runs),
        nodes=run.nodes,
        ranks_per_node=run.ranks_per_node,
        hosts=tuple(sorted({r.host for r in runs})),
        interval=Interval(start_s=agg.start, end_s=agg.end, wall_s=agg.end - agg.start),
        alignment_s=agg.alignment_s,
        samples_per_s=agg.metrics.samples_per_s,
        bytes_per_s=agg.metrics.bytes_per_s,
        skew=agg.skew,
        slowest_rank=agg.slowest.rank,
        slowest_host=agg.slowest.host,
        slowest_samples_per_s=agg.slowest.samples_per_s,
        sync=run.sync,
        steps=agg.steps,
        data_wait_fraction=agg.metrics.stall_fraction,
        peer_wait_fraction=agg.peer_wait_fraction,
        allreduce_fraction=agg.allreduce_fraction,
        free_running_au=agg.free_running_au,
        straggler_cost=agg.straggler_cost,
        interconnect=run.interconnect.name if run.interconnect else None,
        allreduce_ms=1000 * model.seconds(len(runs)) if model else None,
        dropped_batches=agg.dropped_batches,
    )


def run_rank(cell: CellSpec, run_dir: Path, ranks: Ranks) -> CellSummary | None:
    """Measure this rank's share of the cell; returns the cell's summary (None where rank 0 failed)."""
    started = utc_now()
    cores = max(1, usable_cores() // ranks.local_world_size)
    inputs = cell_inputs(cell, _consumer(cell.accelerator, cell.loader.batch_size, ranks), cores)
    run = cell.run
    mine: list[Measurement] = []
    gathered: list[list[RankRun]] = []  # rank 0's alone: each repeat's runs of every rank
    for _ in range(run.repeats):
        m = measure(inputs, ranks)
        mine.append(m)
        runs = ranks.gather(_rank_run(m, ranks, cores, cell))  # every rank takes part
        if runs is not None:  # on rank 0
            gathered.append(runs)
    files = None
    if ranks.rank == 0:
        try:
            files = _cell_files(inputs, mine, gathered, started)
        except BaseException:
            ranks.broadcast(None)  # the others stop waiting; this rank's error is the cell's
            raise
    summary = ranks.broadcast(files.summary if files else None)
    if files:
        files.publish(run_dir)
    elif summary is not None and ranks.host_leader:
        publish_cell(run_dir, cell.cell_id, {SUMMARY_NAME: summary})
    return summary


def main(argv: list[str] | None = None) -> int:
    die_with_launcher()
    cell, run_dir = cell_arguments(argv, "torchrun [...] -m iobench.cell.entry.rank")
    ranks = Ranks.from_env()
    if ranks.rank != 0:
        os.environ.pop(LIVE_ENV, None)  # the sweep's live display follows rank 0
    try:
        cuda = cell.accelerator.kind == "torch" and torch.cuda.is_available()
        start_group(ranks, cuda=cuda, timeout_s=cell.run.timeout_s)
        run_rank(cell, run_dir, ranks)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        # a DataLoader worker's error arrives with the worker's traceback; its last line says it
        said = f"{type(exc).__name__}: {exc}".strip().splitlines()[-1]
        write_rank_error(ranks, f"{ranks.describe()}: {said}")
        return 1
    finally:
        end_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
