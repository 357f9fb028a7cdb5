"""One measured run of a cell: make the cache state, build the loader, run the steps, analyse.

A cell runs this once per repeat (and the capacity check once per accelerator count), each time
from a freshly prepared cache state, so repeats are independent measurements of the same thing.

In a multi-rank cell every rank runs it at once: the first rank on each host makes the host's cache
state (the shard cache and the page cache are the host's, shared by its ranks), then a barrier
starts every rank's loader together, so all step rows count from one instant; a second barrier
after the last step keeps the host's telemetry running until its slowest rank is done.
"""

from __future__ import annotations

import contextlib
import os
import time

from iobench.accelerators.alone import time_alone
from iobench.analysis import window
from iobench.analysis.cellfigures import RunFacts, analyse
from iobench.cell.checkpointing import CellCheckpoints
from iobench.cell.inputs import CellInputs
from iobench.cell.live import live_file
from iobench.cell.protocol import PARENT_ENV
from iobench.cell.ranks.allreduce import allreduce_model
from iobench.cell.ranks.distributed import SOLO, Ranks
from iobench.cell.ranks.sync import StepSync
from iobench.cell.records import Measurement, StepLog
from iobench.cell.steps.loaderfactory import epoch_factory, loader_config
from iobench.cell.steps.steploop import mark_warmup, run_steps, step_durations
from iobench.cell.telemetry import Telemetry, TelemetrySampler
from iobench.host.cpuload import HostLoad
from iobench.results.spec import CellSpec, RunSettings
from loaders.registry import backend


def step_sync(cell: CellSpec, consumer, ranks: Ranks) -> StepSync | None:
    """How this rank keeps step with the others (sync.py); None in a one-rank or free-running cell."""
    run = cell.run
    if not ranks.distributed or run.sync == "none":
        return None
    model = allreduce_model(run, cell.accelerator, consumer) if run.sync == "allreduce" else None
    return StepSync(ranks, run.sync, model, getattr(consumer, "device", None))


def cell_processes(ranks: Ranks) -> int:
    """The root of the processes whose reads are this cell's on this host: this process and its
    loader workers, or under torchrun the agent that started every rank on the host."""
    return os.getppid() if ranks.distributed and "TORCHELASTIC_RUN_ID" in os.environ else os.getpid()


def sweep_process() -> int | None:
    """The sweep's process, whose CPU is iobench's own (None where the cell runs on its own)."""
    pid = os.environ.get(PARENT_ENV)
    return int(pid) if pid and pid.isdigit() else None


def window_extension(run: RunSettings, ranks: Ranks):
    """``run_steps``'s ``more``: after the requested epochs, whether the window is still short of
    ``run.min_measure`` on any rank (all ranks get the same answer, so they run the same epochs).
    None when ``run.max_steps`` fixes the length."""
    if run.max_steps is not None:
        return None
    fixed = None if run.warmup_steps == "auto" else int(run.warmup_steps)

    def more(log: StepLog) -> bool:
        # an epoch that delivered nothing (a rank's share ran dry) would deliver nothing again
        delivered = bool(log.rows) and log.rows[-1].epoch == len(log.epoch_stats) - 1
        short = delivered and window.short_of(
            run.min_measure, *window.provisional(log.rows, step_durations(log), fixed)
        )
        return ranks.any(short)

    return more


def measure(inputs: CellInputs, ranks: Ranks = SOLO) -> Measurement:
    cell, consumer = inputs.cell, inputs.consumer
    run, loader = cell.run, cell.loader
    cache_state = inputs.tier.prepare(inputs.manifest, cell.cache) if ranks.host_leader else None
    auto = run.warmup_steps == "auto"
    limit = max(run.epochs, window.MAX_EPOCHS)
    live = live_file()
    if live:
        live.start_run()
    sampler = (
        TelemetrySampler(root=cell_processes(ranks), sweep=sweep_process())
        if ranks.host_leader
        else contextlib.nullcontext(Telemetry())
    )
    checkpoints = CellCheckpoints(cell.checkpoint, consumer, ranks, cell.cell_id) if cell.checkpoint else None
    with sampler as telemetry:
        ranks.barrier()
        released_at = time.time()
        created_at = time.perf_counter()
        saver = checkpoints.start(created_at) if checkpoints else None
        make_epoch = epoch_factory(
            loader.kind,
            loader_config(
                inputs.items, inputs.source, loader, run, rank=ranks.rank, world_size=ranks.world_size
            ),
        )
        log = run_steps(
            make_epoch,
            consumer,
            created_at=created_at,
            epochs=run.epochs,
            warmup_steps=0 if auto else int(run.warmup_steps),
            max_steps=run.max_steps,
            on_step=live.on_step if live else None,
            rank=ranks.rank,
            record_keys=run.record_keys,
            sync=step_sync(cell, consumer, ranks),
            more=window_extension(run, ranks),
            max_epochs=limit,
            after_step=saver.after_step if saver else None,
        )
        if saver:  # a background save still writing ends before the step is timed alone
            saver.close()
        make_epoch.close()  # and the loader's workers, reading ahead into the next epoch, stop
        ranks.barrier()
    # the workers are gone: the same step on the last batch, with the host to itself (a host's
    # ranks one at a time, each while the others wait)
    alone = None
    for turn in range(ranks.local_world_size):
        if turn == ranks.local_rank and log.last_input is not None:
            alone = time_alone(consumer, *log.last_input, min_seconds=0.5)
        ranks.barrier()
    log.last_input = None
    steady = None
    if auto and log.rows:
        steady = window.warmup(step_durations(log))
        mark_warmup(log, steady.warmup_steps)
    facts = run_facts(inputs, ranks, capped_by(run, len(log.epoch_stats), limit))
    analysis = analyse(
        log.rows,
        facts=facts,
        epoch_stats=log.epoch_stats,
        measured_stats=log.measured_stats,
        alone=alone,
        time_to_first_batch_s=log.time_to_first_batch_s,
        device_read_bytes=window_device_reads(log, telemetry) if facts.cold else None,
        # a rank of a multi-rank cell shares its host's counters with the others: the job's budget
        # is taken over every rank together (entry/rank.py)
        load=None if ranks.distributed else window_load(log, telemetry, inputs.cores),
        run_stats=log.all_stats,
        completed_epochs=log.epochs_completed,
    )
    figures = checkpoints.finish(analysis.entries, ranks.local_world_size) if checkpoints else None
    return Measurement(log, analysis, cache_state, telemetry, steady, released_at, alone, figures)


def capped_by(run: RunSettings, started: int, limit: int) -> str:
    """What stopped the run adding epochs, for a window left short."""
    if run.max_steps is not None:
        return "run.max_steps"
    return f"the {limit}-epoch limit" if started >= limit else "an epoch that delivered no batch"


def run_facts(inputs: CellInputs, ranks: Ranks, capped: str) -> RunFacts:
    """What the analysis needs to know of this rank's run besides its steps."""
    cell, consumer = inputs.cell, inputs.consumer
    run, loader = cell.run, cell.loader
    return RunFacts(
        workers=loader.workers,
        cores=inputs.cores,
        demand_samples_per_s=consumer.demand_samples_per_s,
        accelerators=cell.accelerator.count,
        au_basis=consumer.au_basis,
        readers_in_process=backend(loader.kind).readers_in_process(loader.options, loader.workers),
        min_measure=run.min_measure,
        requested_epochs=run.epochs,
        capped=capped,
        cold=cell.cache == "cold" and ranks.host_leader and inputs.tier.reads_block_devices,
        client=inputs.client,
    )


def window_load(log: StepLog, telemetry: Telemetry, cores: int) -> HostLoad | None:
    """The host's load over the measured window (telemetry.py): the core budget's input."""
    measured = [r for r in log.rows if not r.warmup]
    if not measured:
        return None
    return telemetry.load(log.created_at + measured[0].t_start, log.created_at + measured[-1].t_end, cores)


def window_device_reads(log: StepLog, telemetry: Telemetry) -> int | None:
    """Bytes the cell's processes caused to be read from block devices over the measured window."""
    measured = [r for r in log.rows if not r.warmup]
    if not measured:
        return None
    start = log.created_at + measured[0].t_start
    rate = telemetry.rate(start, log.created_at + measured[-1].t_end, lambda t: t.process_read_bytes)
    return None if rate is None else int(rate * (measured[-1].t_end - measured[0].t_start))
