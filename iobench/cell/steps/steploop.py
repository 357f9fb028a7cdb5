"""The training step loop: per step, how long the consumer waited for data, copied it, computed,
how long the device worked, and the CPU the trainer's process used.

Every timestamp comes from one monotonic clock (time.perf_counter), so the metrics can be rebuilt
from the rows alone. The CPU is the process's (time.process_time: every thread of it, so the
pin-memory thread and torch's intra-op and autograd threads too; loader workers are processes of
their own and not in it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from iobench.accelerators.consumers import Consumer
from iobench.cell.ranks.sync import StepSync
from iobench.cell.records import StepLog
from iobench.results.figures import StepRow
from loaders import Batch, StageStats


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
    after_step: Callable[[int], float] | None = None,
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
    ``after_step(step)``, called as each step ends (after its all-reduce), returns the seconds it
    blocked the loop (a checkpoint save): they count in the step, as its ``checkpoint_s``.
    """
    loop = _StepLoop(
        consumer,
        StepLog(created_at=created_at),
        warmup_steps=warmup_steps,
        on_step=on_step,
        rank=rank,
        record_keys=record_keys,
        sync=sync,
        after_step=after_step,
    )
    epoch = 0
    while epoch < epochs or (more is not None and epoch < max_epochs and more(loop.log)):
        if max_steps is not None and loop.step >= max_steps:
            break
        loop.epoch(make_epoch, epoch, max_steps)
        epoch += 1
    return loop.close()


# (perf_counter, process_time) where a step's wait began
Since = tuple[float, float]


class _StepLoop:
    """The state the training loop keeps across steps and epochs (run_steps' loop)."""

    def __init__(
        self,
        consumer: Consumer,
        log: StepLog,
        *,
        warmup_steps: int,
        on_step: Callable[[StepRow], None] | None,
        rank: int,
        record_keys: bool,
        sync: StepSync | None,
        after_step: Callable[[int], float] | None = None,
    ) -> None:
        self.consumer, self.log, self.sync = consumer, log, sync
        self.after_step = after_step
        self.warmup_steps, self.on_step, self.rank, self.record_keys = (
            warmup_steps,
            on_step,
            rank,
            record_keys,
        )
        self.step = 0
        self.batches: Iterator[Batch] | None = None
        # where the wait of the next step began, when before its own call to next(): at an epoch's
        # opening, or at a worker's stats-only tail (no step of its own), so no second goes unaccounted
        self.waiting_since: Since | None = None
        self.opening = 0.0  # of the next step's wait, the epoch's opening
        # each batch's stats, folded into the log's after the loop: a merge costs ~15 µs, the step
        # loop's own time (the wall split's "loop") pays only the append
        self.unmerged: list[tuple[int, StageStats, bool]] = []
        self.kept: tuple[object, object] | None = None  # the step's input, to become log.last_input
        self.held: Batch | None = None  # the last step's batch, released in the next step's wait

    def epoch(self, make_epoch: Callable[[int], Iterable[Batch]], epoch: int, max_steps: int | None) -> None:
        # the training loop waits while the last epoch's iterator shuts down and this one's starts:
        # the epoch's first step counts it in its wait (open_s)
        self.waiting_since = self.waiting_since or (time.perf_counter(), time.process_time())
        self.batches = None
        self.batches = iter(make_epoch(epoch))
        self.opening = time.perf_counter() - self.waiting_since[0]
        self.log.epoch_stats.append(StageStats())
        while (max_steps is None or self.step < max_steps) and self._next(epoch):
            pass

    def _next(self, epoch: int) -> bool:
        """One pass of the loop: a batch waited for and trained on (or a stats-only tail taken); False
        when the epoch ended."""
        t0, c0 = self.waiting_since or (time.perf_counter(), time.process_time())
        self.waiting_since = None
        # the last step's tensors are released here, inside the wait, as a training loop's
        # `for x, y in loader` releases them on its next batch (a large batch's free takes ms)
        if self.kept is not None:
            self.log.last_input, self.kept = self.kept, None
        self.held = None
        assert self.batches is not None
        try:
            batch = next(self.batches)
        except StopIteration:
            if self.sync is not None:
                self.sync.agree(False)
            self.log.epochs_completed += 1
            self.waiting_since = (t0, c0)  # the loop waits on until the next epoch's first batch
            return False
        t1 = time.perf_counter()
        peer_wait_s = 0.0
        if self.sync is not None and batch.delivers:
            peer_wait_s, everyone = self.sync.agree(True)
            if not everyone:  # a peer ran out: the epoch ends for every rank, this batch unused
                self.unmerged.append((epoch, batch.stats, False))
                self.log.dropped_batches += 1
                self.log.epochs_completed += 1
                self.waiting_since = (t0, c0)
                return False
        if not batch.delivers:  # a stats-only tail from a worker: no step happens
            self.unmerged.append((epoch, batch.stats, False))
            self.waiting_since = (t0, c0)
            return True
        self._train(batch, epoch, (t0, c0), t1, peer_wait_s)
        self.held = batch
        return True

    def _train(self, batch: Batch, epoch: int, since: Since, t1: float, peer_wait_s: float) -> None:
        """The step on ``batch``, that began waiting at ``since`` and had it at ``t1``; its row logged."""
        log, consumer, (t0, c0) = self.log, self.consumer, since
        if log.time_to_first_batch_s is None:
            log.time_to_first_batch_s = t1 - log.created_at
        data, labels = batch.data, batch.labels
        # called only for a batch that delivers (data: its images or sizes), and every such batch
        # is made with its labels (loaders/pipeline/assemble.py, the DALI loader)
        assert data is not None and labels is not None
        x, y, h2d_s = consumer.h2d(data, labels)
        stepping = time.perf_counter()
        consumer.step(x, y)
        # a CPU clock is read by a system call, where the scheduler takes the core from a thread
        # that ran out its slice: under contention that is ms, the trainer's own, so its step ends
        # after the read
        trainer_cpu_s = time.process_time() - c0
        compute_s = time.perf_counter() - stepping
        allreduce_s = self.sync.allreduce(compute_s) if self.sync is not None else 0.0
        checkpoint_s = self.after_step(self.step) if self.after_step is not None else 0.0
        t2 = time.perf_counter()
        if log.last_input is None or len(y) >= len(log.last_input[1]):  # type: ignore[arg-type]  # labels: a tensor
            self.kept = (x, y)
        warm = self.step < self.warmup_steps
        self.unmerged.append((epoch, batch.stats, not warm))
        if not warm:
            if log.measure_start is None:
                log.measure_start = t0
            log.measure_end = t2
        row = _row(
            batch,
            consumer,
            step=self.step,
            epoch=epoch,
            warmup=warm,
            rank=self.rank,
            created_at=log.created_at,
            times=(t0, t1, t2),
            h2d_s=h2d_s,
            compute_s=compute_s,
            peer_wait_s=peer_wait_s,
            allreduce_s=allreduce_s,
            trainer_cpu_s=trainer_cpu_s,
            open_s=self.opening,
            checkpoint_s=checkpoint_s,
        )
        if self.record_keys:
            log.keys.extend((self.rank, epoch, self.step, key) for key in batch.keys)
        log.rows.append(row)
        log.row_stats.append(batch.stats)
        if self.on_step:
            self.on_step(row)
        self.opening = 0.0
        self.step += 1

    def close(self) -> StepLog:
        """The log, once the loop is done: the last epoch's workers gone (before the caller times the
        step alone), the last input kept, the batches' stats folded in."""
        self.batches = self.held = None
        log = self.log
        if self.kept is not None:
            log.last_input = self.kept
        for at, stats, measured in self.unmerged:
            log.epoch_stats[at].merge(stats)
            log.all_stats.merge(stats)
            if measured:
                log.measured_stats.merge(stats)
        return log


def _row(
    batch: Batch,
    consumer: Consumer,
    *,
    step: int,
    epoch: int,
    warmup: bool,
    rank: int,
    created_at: float,
    times: tuple[float, float, float],
    h2d_s: float,
    compute_s: float,
    peer_wait_s: float,
    allreduce_s: float,
    trainer_cpu_s: float,
    open_s: float,
    checkpoint_s: float = 0.0,
) -> StepRow:
    """A step's row: ``times`` are its start of waiting, its batch in hand and its end (perf_counter)."""
    t0, t1, t2 = times
    stats = batch.stats
    return StepRow(
        step=step,
        epoch=epoch,
        warmup=warmup,
        t_start=t0 - created_at,
        wait_s=t1 - t0,
        h2d_s=h2d_s,
        compute_s=compute_s,
        t_end=t2 - created_at,
        samples=len(batch),
        bytes_read=stats.bytes_read,
        rank=rank,
        peer_wait_s=peer_wait_s,
        allreduce_s=allreduce_s,
        device_s=consumer.last_device_s,
        compute_draw_s=consumer.last_draw_s,
        trainer_cpu_s=trainer_cpu_s,
        reader=batch.reader,
        begun_s=batch.made[0] - created_at if batch.made else None,
        ready_s=batch.made[1] - created_at if batch.made else None,
        fetch_wait_s=stats.wall_s["fetch"],
        read_asked_s=[a - created_at for a, _ in batch.reads] if batch.reads else None,
        read_in_s=[b - created_at for _, b in batch.reads] if batch.reads else None,
        open_s=open_s,
        decode_s=stats.wall_s["decode"],
        augment_s=stats.wall_s["augment"],
        collate_s=stats.wall_s["collate"],
        reader_cpu_s=sum(stats.cpu_s.values()),
        checkpoint_s=checkpoint_s,
    )


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
