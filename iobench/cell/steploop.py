"""The training step loop: per step, how long the consumer waited for data, copied it, computed,
how long the device worked, and the CPU the trainer's process used.

Every timestamp comes from one monotonic clock (time.perf_counter), so the metrics can be rebuilt
from the rows alone. The CPU is the process's (time.process_time: every thread of it, so the
pin-memory thread and torch's intra-op and autograd threads too; loader workers are processes of
their own and not in it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from iobench.cell.accelerator import Consumer
from iobench.cell.sync import StepSync
from iobench.results.figures import StepRow
from loaders import Batch, StageStats


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


def run_steps(
    make_epoch: Callable[[int], Iterable[Batch]],
    consumer: Consumer,
    *,
    created_at: float,
    epochs: int = 1,
    warmup_steps: int = 0,
    max_steps: int | None = None,
    on_step: Callable[[StepRow], None] | None = None,
    rank: int = 0,
    record_keys: bool = False,
    sync: StepSync | None = None,
    more: Callable[[StepLog], bool] | None = None,
    max_epochs: int = 1,
) -> StepLog:
    """Run ``epochs`` passes (or ``max_steps`` steps) of ``make_epoch(epoch)`` through ``consumer``.

    ``created_at`` is the perf_counter reading taken just before the loader was built, so the time
    to the first batch includes worker start-up and the first shard open. ``record_keys`` keeps
    every delivered sample's key (a check that ranks read disjoint samples; costs memory).
    ``sync`` keeps the ranks in step as synchronous data-parallel training does (sync.py): a rank
    with its batch waits for its peers to have theirs, computes, then waits the modelled
    all-reduce; an epoch ends for every rank when one rank's loader runs out.
    ``more``, asked after the requested epochs and after each added one, says whether to run
    another (up to ``max_epochs`` in all): how a short window is extended (analysis/window.py).
    In a multi-rank cell it must give every rank the same answer.
    """
    log = StepLog(created_at=created_at)
    step = 0
    epoch = 0
    batches = None
    # where the wait of the next step began, when before its own call to next(): at an epoch's
    # opening, or at a worker's stats-only tail (no step of its own), so no second goes unaccounted
    waiting_since: tuple[float, float] | None = None  # (perf_counter, process_time)
    # each batch's stats, folded into the log's after the loop: a merge costs ~15 µs, the step
    # loop's own time (the wall split's "loop") pays only the append
    unmerged: list[tuple[int, StageStats, bool]] = []
    kept: tuple[object, object] | None = None  # the step's input, to become log.last_input
    while epoch < epochs or (more is not None and epoch < max_epochs and more(log)):
        if max_steps is not None and step >= max_steps:
            break
        # the training loop waits while the last epoch's iterator shuts down and this one's starts:
        # the epoch's first step counts it in its wait (open_s)
        waiting_since = waiting_since or (time.perf_counter(), time.process_time())
        batches = None
        batches = iter(make_epoch(epoch))
        opening = time.perf_counter() - waiting_since[0]
        log.epoch_stats.append(StageStats())
        while max_steps is None or step < max_steps:
            t0, c0 = waiting_since or (time.perf_counter(), time.process_time())
            waiting_since = None
            # the last step's tensors are released here, inside the wait, as a training loop's
            # `for x, y in loader` releases them on its next batch (a large batch's free takes ms)
            if kept is not None:
                log.last_input, kept = kept, None
            x = y = None
            try:
                batch = next(batches)
            except StopIteration:
                if sync is not None:
                    sync.agree(False)
                log.epochs_completed += 1
                waiting_since = (t0, c0)  # the loop waits on until the next epoch's first batch
                break
            t1 = time.perf_counter()
            peer_wait_s = 0.0
            if sync is not None and batch.delivers:
                peer_wait_s, everyone = sync.agree(True)
                if not everyone:  # a peer ran out: the epoch ends for every rank, this batch unused
                    unmerged.append((epoch, batch.stats, False))
                    log.dropped_batches += 1
                    log.epochs_completed += 1
                    waiting_since = (t0, c0)
                    break
            if not batch.delivers:  # a stats-only tail from a worker: no step happens
                unmerged.append((epoch, batch.stats, False))
                waiting_since = (t0, c0)
                continue
            if log.time_to_first_batch_s is None:
                log.time_to_first_batch_s = t1 - created_at
            x, y, h2d_s = consumer.h2d(batch.data, batch.labels)
            stepping = time.perf_counter()
            consumer.step(x, y)
            # a CPU clock is read by a system call, where the scheduler takes the core from a thread
            # that ran out its slice: under contention that is ms, the trainer's own, so its step ends
            # after the read
            trainer_cpu_s = time.process_time() - c0
            compute_s = time.perf_counter() - stepping
            allreduce_s = sync.allreduce(compute_s) if sync is not None else 0.0
            t2 = time.perf_counter()
            if log.last_input is None or len(y) >= len(log.last_input[1]):
                kept = (x, y)
            warm = step < warmup_steps
            unmerged.append((epoch, batch.stats, not warm))
            if not warm:
                if log.measure_start is None:
                    log.measure_start = t0
                log.measure_end = t2
            row = StepRow(
                step=step,
                epoch=epoch,
                warmup=warm,
                t_start=t0 - created_at,
                wait_s=t1 - t0,
                h2d_s=h2d_s,
                compute_s=compute_s,
                t_end=t2 - created_at,
                samples=len(batch),
                bytes_read=batch.stats.bytes_read,
                rank=rank,
                peer_wait_s=peer_wait_s,
                allreduce_s=allreduce_s,
                device_s=consumer.last_device_s,
                compute_draw_s=consumer.last_draw_s,
                trainer_cpu_s=trainer_cpu_s,
                reader=batch.reader,
                begun_s=batch.made[0] - created_at if batch.made else None,
                ready_s=batch.made[1] - created_at if batch.made else None,
                fetch_wait_s=batch.stats.wall_s["fetch"],
                read_asked_s=[a - created_at for a, _ in batch.reads] if batch.reads else None,
                read_in_s=[b - created_at for _, b in batch.reads] if batch.reads else None,
                open_s=opening,
                decode_s=batch.stats.wall_s["decode"],
                augment_s=batch.stats.wall_s["augment"],
                collate_s=batch.stats.wall_s["collate"],
                reader_cpu_s=sum(batch.stats.cpu_s.values()),
            )
            if record_keys:
                log.keys.extend((rank, epoch, step, key) for key in batch.keys)
            log.rows.append(row)
            log.row_stats.append(batch.stats)
            if on_step:
                on_step(row)
            opening = 0.0
            step += 1
        epoch += 1
    del batches  # the last epoch's workers, before the caller times the step alone
    if kept is not None:
        log.last_input = kept
    for at, stats, measured in unmerged:
        log.epoch_stats[at].merge(stats)
        log.all_stats.merge(stats)
        if measured:
            log.measured_stats.merge(stats)
    return log


def step_durations(log: StepLog) -> list[float]:
    """Seconds from the end of one step to the end of the next; the first counts from the
    loader's construction, so start-up shows as a slow first step."""
    ends = [r.t_end for r in log.rows]
    return [b - a for a, b in zip([0.0, *ends[:-1]], ends, strict=True)]


def mark_warmup(log: StepLog, warmup_steps: int) -> None:
    """Treat the first ``warmup_steps`` rows as warm-up (e.g. as detected from the step series) and
    rebuild what the measured interval covers."""
    d = min(warmup_steps, max(0, len(log.rows) - 1))  # keep at least one measured step
    log.measured_stats = StageStats()
    for i, (row, stats) in enumerate(zip(log.rows, log.row_stats, strict=True)):
        row.warmup = i < d
        if not row.warmup:
            log.measured_stats.merge(stats)
    if log.rows:
        log.measure_start = log.created_at + log.rows[d].t_start
        log.measure_end = log.created_at + log.rows[-1].t_end
