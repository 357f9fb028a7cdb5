"""A multi-rank job's figures, a sweep cell's ranks or a probed job's alike: each rank over the
interval every rank was measuring, their sum, how unequal the ranks were, and which was slowest.
Defined in docs/method.md (Multi-rank cells).

Every rank's step rows count from one instant (the barrier that released a cell's loaders together,
or the first of a probed job's iterators), so the rows of different ranks share a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from iobench.results.choices import Bound
from iobench.results.figures import (
    EpochFigures,
    PipelineMetrics,
    RankFigures,
    StepAccount,
    StepAlone,
    StepRow,
    WallSplit,
)
from iobench.results.known import every_known
from loaders import StageStats

from .cellfigures import stage_shares
from .epochs import epoch_figures
from .ledger import Totals, clipped, ledger, totals
from .metrics import pipeline_metrics


@dataclass
class RankInput:
    """One rank's measured run, as the job's figures take it."""

    rank: int
    local_rank: int
    node_rank: int
    host: str
    rows: list[StepRow]  # its steps, warm-up marked
    measured_stats: StageStats = field(default_factory=StageStats)  # its loader's, over the measured steps
    epoch_stats: list[StageStats] = field(default_factory=list)
    bound: Bound = "unknown"  # the rank's own verdict
    binding_stage: str | None = None
    released_at: float = 0.0  # time.time() as its loader was built (the spread is the alignment)
    time_to_first_batch_s: float | None = None
    alone: StepAlone | None = None  # its step timed alone
    au_basis: str | None = None
    readers_in_process: bool = False
    cache: str | None = None  # the cache state its host achieved
    dropped_batches: int = 0  # synchronous cells: batches unused because a peer's epoch ran out

    def entries(self) -> tuple[StepAccount, ...]:
        """This rank's steps' accounts (analysis/ledger.py)."""
        return ledger(self.rows, self.alone, stage_shares(self.measured_stats))


@dataclass
class Aggregate:
    start: float  # the common interval, seconds after the barrier
    end: float
    ranks: list[RankFigures]  # per-rank figures over the common interval, in rank order
    metrics: PipelineMetrics  # the whole job over the common interval
    split: WallSplit  # where every rank's time over the interval went
    entries: tuple[StepAccount, ...]  # every rank's steps' accounts, rank by rank
    window: tuple[StepAccount, ...]  # ... clipped to the common interval
    epochs: tuple[EpochFigures, ...]
    measured_stats: StageStats  # every rank's loader over its measured steps, summed
    skew: float | None  # fastest rank's samples/s over the slowest's; None when the slowest delivered none
    slowest: RankFigures
    alignment_s: float  # spread of the barrier's release over the ranks (wall clocks: exact on one host)
    synchronous: bool = False
    steps: int = 0  # steps every rank completed in the interval
    peer_wait_fraction: float = 0.0  # the ranks' mean share of the interval waiting for the slowest
    allreduce_fraction: float = 0.0  # ... in the modelled exposed all-reduce
    free_running_au: float | None = None  # the ranks' mean AU had they not waited for peers
    dropped_batches: int = 0

    @property
    def straggler_cost(self) -> float | None:
        """AU the job lost to waiting for peers: its ranks' free-running AU less its own."""
        return None if self.free_running_au is None else self.free_running_au - self.metrics.au


def common_interval(runs: list[RankInput]) -> tuple[float, float]:
    """From the end of the last rank's warm-up to the end of the first rank's last step: the time in
    which every rank was past its warm-up and still running."""
    for run in runs:
        if not any(not r.warmup for r in run.rows):
            raise ValueError(
                f"rank {run.rank} has no measured step ({len(run.rows)} step(s), all warm-up): give every "
                "rank more steps (run.epochs, run.max_steps, more data) or fewer warm-up steps (run.warmup_steps)"
            )
    firsts = [(next(r.t_start for r in run.rows if not r.warmup), run.rank) for run in runs]
    lasts = [(run.rows[-1].t_end, run.rank) for run in runs]
    (start, late), (end, early) = max(firsts), min(lasts)
    if end <= start:
        raise ValueError(
            f"the ranks' measured intervals do not overlap: rank {early} ran its last step to {end:.2f} s, "
            f"before rank {late}'s warm-up ended at {start:.2f} s; give every rank more steps "
            "(run.epochs, run.max_steps) or fewer warm-up steps (run.warmup_steps)"
        )
    return start, end


def lockstep(runs: list[RankInput]) -> tuple[int, int]:
    """Synchronous ranks share step numbers: the first step after every rank's warm-up and the last
    step every rank completed."""
    common_interval(runs)  # every rank measured something, and they overlapped
    k0 = max(next(r.step for r in run.rows if not r.warmup) for run in runs)
    k1 = min(run.rows[-1].step for run in runs)
    if k1 < k0:
        raise ValueError(
            f"the ranks share no measured step (the last rank's warm-up ends at step {k0}, the first rank "
            f"stopped at step {k1}); give every rank more steps or fewer warm-up steps"
        )
    return k0, k1


def rank_figures(run: RankInput, start: float, end: float, inside: list[StepAccount]) -> RankFigures:
    """One rank over [start, end]; ``inside``: its steps' accounts clipped to it."""
    wall = end - start
    t = totals(inside, span_s=wall)
    delivered = [e for e in inside if e.delivered]
    return RankFigures(
        rank=run.rank,
        local_rank=run.local_rank,
        node_rank=run.node_rank,
        host=run.host,
        steps=t.steps,
        samples=t.samples,
        bytes_read=t.bytes_read,
        samples_per_s=t.samples / wall,
        bytes_per_s=t.bytes_read / wall,
        wait_s=t.wait,
        compute_s=t.compute,
        au=t.au,
        stall_fraction=t.wait / wall,
        wait_p99_ms=float(np.percentile([e.wait * 1000.0 for e in delivered], 99)) if delivered else None,
        warmup_steps=sum(r.warmup for r in run.rows),
        verdict=run.bound,
        binding_stage=run.binding_stage,
        cache=run.cache,
        peer_wait_s=t["peer_wait"],
        allreduce_s=t["allreduce"],
        free_running_au=free_running_au(t),
    )


def free_running_au(t: Totals) -> float | None:
    """The AU of ``t`` had its rank not waited for peers: its device busy over its span less that wait."""
    rest = t.span_s - t["peer_wait"]
    return t["device"] / rest if rest > 0 else None


def merged_stats(runs: list[RankInput]) -> tuple[StageStats, list[StageStats]]:
    """Every rank's loader counters over its measured steps, and per epoch, summed."""
    measured = StageStats()
    epochs: list[StageStats] = []
    for run in runs:
        measured.merge(run.measured_stats)
        for epoch, stats in enumerate(run.epoch_stats):
            if epoch == len(epochs):
                epochs.append(StageStats())
            epochs[epoch].merge(stats)
    return measured, epochs


def aggregate(runs: list[RankInput], synchronous: bool = False) -> Aggregate:
    """The job's figures from its ranks' runs (one run per rank, in rank order): the same functions
    as a one-rank cell's over every rank's steps' accounts clipped to the common interval.

    Free-running ranks (``sync: none``): the interval in which every rank was past its warm-up and
    still running, and the job's samples the sum of what every rank delivered in it. Synchronous
    ranks share step numbers: the interval runs from the start of the first step after every
    rank's warm-up to the end of the last step every rank completed, and the job's samples are
    those steps' (steps all ranks completed x global batch)."""
    ledgers = [run.entries() for run in runs]
    if synchronous:
        k0, k1 = lockstep(runs)
        kept = [[e for e in entries if k0 <= e.step <= k1] for entries in ledgers]
        start = min(next(r.t_start for r in run.rows if r.step == k0) for run in runs)
        end = max(entries[-1].end_s for entries in kept)
    else:
        start, end = common_interval(runs)
        kept = [list(entries) for entries in ledgers]
    wall = end - start
    n = len(runs)
    inside = [
        covering([c for e in entries if (c := clipped(e, start, end)) is not None], start, end)
        for entries in ledgers
    ]
    if synchronous:  # the job's samples: the steps every rank completed
        steps = set(range(k0, k1 + 1))
        inside = [[c if c.step in steps else _undelivered(c) for c in rank] for rank in inside]
    ranks = [rank_figures(run, start, end, rank) for run, rank in zip(runs, inside, strict=True)]
    window = [c for rank in inside for c in rank]
    job = totals(window, span_s=n * wall)
    every = tuple(e for entries in ledgers for e in entries)
    counted_waits = [e.wait for entries in kept for e in entries if start < e.end_s <= end]
    methods = {run.readers_in_process for run in runs}
    measured, epoch_stats = merged_stats(runs)
    firsts = every_known(run.time_to_first_batch_s for run in runs)
    metrics = pipeline_metrics(
        window,
        job,
        ranks=n,
        every_step=every,
        time_to_first_batch_s=max(firsts) if firsts else None,
        alone={run.rank: run.alone for run in runs if run.alone is not None},
        au_basis=runs[0].au_basis,
        readers_in_process=methods == {True},
        waits=counted_waits or None,
    )
    if synchronous:  # in step, every rank delivers alike: the slowest is the one the others waited for
        slowest = min(ranks, key=lambda f: (f.peer_wait_s, -f.wait_s, f.rank))
    else:
        slowest = min(ranks, key=lambda f: (f.samples_per_s, f.rank))
    fastest = max(f.samples_per_s for f in ranks)
    released = [run.released_at for run in runs]
    free = [f.free_running_au for f in ranks if f.free_running_au is not None]
    return Aggregate(
        start=start,
        end=end,
        ranks=ranks,
        metrics=metrics,
        split=job.split(),
        entries=every,
        window=tuple(window),
        epochs=epoch_figures(every, window, epoch_stats),
        measured_stats=measured,
        skew=fastest / slowest.samples_per_s if slowest.samples_per_s > 0 else None,
        slowest=slowest,
        alignment_s=max(released) - min(released),
        synchronous=synchronous,
        steps=min(rank.steps for rank in ranks),
        peer_wait_fraction=job["peer_wait"] / job.span_s,
        allreduce_fraction=job["allreduce"] / job.span_s,
        free_running_au=float(np.mean(free)) if len(free) == len(ranks) else None,
        dropped_batches=sum(run.dropped_batches for run in runs),
    )


def covering(entries: list[StepAccount], start: float, end: float) -> list[StepAccount]:
    """A rank's accounts clipped to [start, end], stretched to cover it: a rank with no step over an
    edge of the interval (it began later, or finished earlier) spent that time outside any step,
    which its first or last account books to the loop."""
    if not entries:
        return entries
    first, last = entries[0], entries[-1]
    if first.start_s > start:
        first = replace(first, start_s=start, loop=first.loop + (first.start_s - start))
    if len(entries) == 1:
        last = first
    if last.end_s < end:
        last = replace(last, end_s=end, loop=last.loop + (end - last.end_s))
    return [first, *entries[1:-1], last] if len(entries) > 1 else [last]


def _undelivered(entry: StepAccount) -> StepAccount:
    return replace(entry, samples=0, bytes_read=0, delivered=False)
