"""A multi-rank cell's figures: each rank over the interval every rank was measuring, their sum,
how unequal the ranks were, and which was slowest. Defined in docs/method.md (Multi-rank cells).

Every rank's step rows count from one instant, the barrier that released all the loaders together
(measure.py), so the rows of different ranks share a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from iobench.analysis.metrics import device_busy, epoch_boundary_wait_ms
from iobench.cell.steploop import StepLog
from iobench.results.figures import (
    CacheState,
    PipelineMetrics,
    RankFigures,
    StepAlone,
    StepRow,
    Verdict,
    Window,
)
from loaders import StageStats


@dataclass
class RankRun:
    """What one rank sends rank 0 after a measured run."""

    rank: int
    local_rank: int
    node_rank: int
    host: str
    cores: int  # this rank's share of its host's usable cores
    log: StepLog
    verdict: Verdict  # the rank's own verdict, over its own measured steps
    au_mlperf: float | None
    warmup_method: str
    released_at: float  # time.time() as the barrier released it (measure.py)
    window: Window | None = None  # what it measured after its warm-up (measure.py)
    cache_state: CacheState | None = None  # its host's, from the first rank on the host
    # the trainer's host (docs/method.md): its step timed alone (one rank of a host at a time), the
    # basis of its AU, and the cores its loader's readers used over its measured steps
    alone: StepAlone | None = None
    au_basis: str | None = None
    loader_cores: float | None = None


@dataclass
class Aggregate:
    start: float  # the common interval, seconds after the barrier
    end: float
    ranks: list[RankFigures]  # per-rank figures over the common interval, in rank order
    metrics: PipelineMetrics  # the whole job over the common interval
    skew: float | None  # fastest rank's samples/s over the slowest's; None when the slowest delivered none
    slowest: RankFigures
    alignment_s: float  # spread of the barrier's release over the ranks (wall clocks: exact on one host)
    log: StepLog = field(default_factory=StepLog)  # every rank's rows and merged stats
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


def common_interval(runs: list[RankRun]) -> tuple[float, float]:
    """From the end of the last rank's warm-up to the end of the first rank's last step: the time in
    which every rank was past its warm-up and still running."""
    for run in runs:
        if not any(not r.warmup for r in run.log.rows):
            raise ValueError(
                f"rank {run.rank} has no measured step ({len(run.log.rows)} step(s), all warm-up): give every "
                "rank more steps (run.epochs, run.max_steps, more data) or fewer warm-up steps (run.warmup_steps)"
            )
    firsts = [(next(r.t_start for r in run.log.rows if not r.warmup), run.rank) for run in runs]
    lasts = [(run.log.rows[-1].t_end, run.rank) for run in runs]
    (start, late), (end, early) = max(firsts), min(lasts)
    if end <= start:
        raise ValueError(
            f"the ranks' measured intervals do not overlap: rank {early} ran its last step to {end:.2f} s, "
            f"before rank {late}'s warm-up ended at {start:.2f} s; give every rank more steps "
            "(run.epochs, run.max_steps) or fewer warm-up steps (run.warmup_steps)"
        )
    return start, end


def counted(rows: list[StepRow], start: float, end: float) -> list[StepRow]:
    """The steps whose samples and bytes count in (start, end]: those that end inside it, as a
    step delivers its batch when it ends. The rank that sets each bound counts exactly its steps
    inside; for the others a step across an edge counts at its end."""
    return [r for r in rows if start < r.t_end <= end]


def _overlap(a: float, b: float, start: float, end: float) -> float:
    return max(0.0, min(b, end) - max(a, start))


@dataclass
class TimeSplit:
    """Seconds of one rank's steps that fell inside the interval, by what the rank was doing."""

    wait: float = 0.0  # for its own batch
    peer_wait: float = 0.0  # for the slowest rank (synchronous cells)
    h2d: float = 0.0
    compute: float = 0.0
    allreduce: float = 0.0  # the modelled exposed all-reduce (synchronous cells)


def times_inside(rows: list[StepRow], start: float, end: float) -> TimeSplit:
    """A step runs data wait, peer wait, host-to-device copy, compute, then the all-reduce, which
    ends it; each part is clipped to [start, end] (fractions of the interval then never exceed 1,
    however the ranks' steps straddle its edges)."""
    split = TimeSplit()
    for r in rows:
        t = r.t_start
        for name, seconds in (("wait", r.wait_s), ("peer_wait", r.peer_wait_s), ("h2d", r.h2d_s)):
            setattr(split, name, getattr(split, name) + _overlap(t, t + seconds, start, end))
            t += seconds
        split.allreduce += _overlap(r.t_end - r.allreduce_s, r.t_end, start, end)
        split.compute += _overlap(r.t_end - r.allreduce_s - r.compute_s, r.t_end - r.allreduce_s, start, end)
    return split


def lockstep(runs: list[RankRun]) -> tuple[int, int]:
    """Synchronous ranks share step numbers: the first step after every rank's warm-up and the last
    step every rank completed."""
    common_interval(runs)  # every rank measured something, and they overlapped
    k0 = max(next(r.step for r in run.log.rows if not r.warmup) for run in runs)
    k1 = min(run.log.rows[-1].step for run in runs)
    if k1 < k0:
        raise ValueError(
            f"the ranks share no measured step (the last rank's warm-up ends at step {k0}, the first rank "
            f"stopped at step {k1}); give every rank more steps or fewer warm-up steps"
        )
    return k0, k1


def rank_figures(run: RankRun, start: float, end: float, rows: list[StepRow]) -> RankFigures:
    """One rank over [start, end]; ``rows``: the steps whose samples count in it."""
    wall = end - start
    samples = sum(r.samples for r in rows)
    bytes_read = sum(r.bytes_read for r in rows)
    split = times_inside(run.log.rows, start, end)
    return RankFigures(
        rank=run.rank,
        local_rank=run.local_rank,
        node_rank=run.node_rank,
        host=run.host,
        steps=len(rows),
        samples=samples,
        bytes_read=bytes_read,
        samples_per_s=samples / wall,
        bytes_per_s=bytes_read / wall,
        wait_s=split.wait,
        compute_s=split.compute,
        au=split.compute / wall,
        stall_fraction=split.wait / wall,
        wait_p99_ms=float(np.percentile([r.wait_s * 1000.0 for r in rows], 99)) if rows else None,
        warmup_steps=sum(r.warmup for r in run.log.rows),
        verdict=run.verdict.bound,
        binding_stage=run.verdict.binding_stage,
        cache=run.cache_state.achieved if run.cache_state else None,
        peer_wait_s=split.peer_wait,
        allreduce_s=split.allreduce,
        free_running_au=split.compute / (wall - split.peer_wait) if wall > split.peer_wait else None,
    )


def merged_log(runs: list[RankRun], start: float, end: float) -> StepLog:
    """One log of every rank's steps (on rank 0's clock) and their stage statistics, summed."""
    first = runs[0].log
    log = StepLog(created_at=first.created_at)
    for run in runs:
        log.rows.extend(run.log.rows)
        log.keys.extend(run.log.keys)
        log.measured_stats.merge(run.log.measured_stats)
        log.all_stats.merge(run.log.all_stats)
        for epoch, stats in enumerate(run.log.epoch_stats):
            if epoch == len(log.epoch_stats):
                log.epoch_stats.append(StageStats())
            log.epoch_stats[epoch].merge(stats)
    firsts = [run.log.time_to_first_batch_s for run in runs]
    log.time_to_first_batch_s = None if None in firsts else max(firsts)  # type: ignore[type-var]
    log.epochs_completed = min(run.log.epochs_completed for run in runs)
    log.measure_start, log.measure_end = first.created_at + start, first.created_at + end
    return log


def trainer_host(
    runs: list[RankRun], per_rank: list[list[StepRow]], computes: list[float], wall: float
) -> dict:
    """The job's figures of the trainer's host over the common interval: AU as the devices' busy
    time (each rank's compute inside the interval, ``computes``, in the proportion of its device's
    busy time to its compute, capped by its own step alone as a one-rank cell's), the median rank's
    step alone and slowdown, the trainer CPU per step and the cores every rank's readers used."""
    n = len(runs)
    busy = sum(
        inside * device_busy(rows, run.alone) / total
        for run, rows, inside in zip(runs, per_rank, computes, strict=True)
        if (total := sum(r.compute_s for r in rows)) > 0
    )
    slowdowns = [
        float(np.median([r.compute_s for r in rows])) / run.alone.step_s
        for run, rows in zip(runs, per_rank, strict=True)
        if rows and run.alone is not None and run.alone.step_s > 0
    ]
    alone = [run.alone.step_s for run in runs if run.alone is not None]
    cpu = [r.trainer_cpu_s for rows in per_rank for r in rows if r.trainer_cpu_s is not None]
    loader = [run.loader_cores for run in runs]
    return {
        "au": busy / (n * wall) if wall > 0 else 0.0,
        "device_busy_s": busy,
        "au_basis": runs[0].au_basis,
        "step_alone_s": float(np.median(alone)) if alone else None,
        "trainer_slowdown": float(np.median(slowdowns)) if slowdowns else None,
        "trainer_cpu_ms_per_step": 1000.0 * float(np.mean(cpu)) if cpu else None,
        "loader_cores": sum(loader) if None not in loader else None,  # type: ignore[arg-type]
    }


def aggregate(runs: list[RankRun], synchronous: bool = False) -> Aggregate:
    """The job's figures from its ranks' runs (one run per rank, in rank order).

    Free-running ranks (``sync: none``): the interval in which every rank was past its warm-up and
    still running, and the job's samples the sum of what every rank delivered in it. Synchronous
    ranks share step numbers: the interval runs from the start of the first step after every
    rank's warm-up to the end of the last step every rank completed, and the job's samples are
    those steps' (steps all ranks completed x global batch)."""
    if synchronous:
        k0, k1 = lockstep(runs)
        per_rank = [[r for r in run.log.rows if k0 <= r.step <= k1] for run in runs]
        start = min(rows[0].t_start for rows in per_rank)
        end = max(rows[-1].t_end for rows in per_rank)
    else:
        start, end = common_interval(runs)
        per_rank = [counted(run.log.rows, start, end) for run in runs]
    wall = end - start
    ranks = [rank_figures(run, start, end, rows) for run, rows in zip(runs, per_rank, strict=True)]
    rows = [r for rank_rows in per_rank for r in rank_rows]
    n = len(runs)
    samples = sum(r.samples for r in rows)
    bytes_read = sum(r.bytes_read for r in rows)
    splits = [times_inside(run.log.rows, start, end) for run in runs]
    wait, h2d, compute = (sum(getattr(s, k) for s in splits) for k in ("wait", "h2d", "compute"))
    waits = np.array([r.wait_s for r in rows])
    pct = np.percentile(waits * 1000.0, [50, 95, 99])
    mlperf = [run.au_mlperf for run in runs]
    firsts = [run.log.time_to_first_batch_s for run in runs]
    metrics = PipelineMetrics(
        steps=len(rows),
        samples=samples,
        wall_s=wall,
        samples_per_s=samples / wall,
        bytes_read=bytes_read,
        bytes_per_s=bytes_read / wall,
        wait_s=wait,
        h2d_s=h2d,
        compute_s=compute,
        au=compute / (n * wall),
        au_mlperf=None if None in mlperf else float(np.mean(mlperf)),  # type: ignore[arg-type]
        stall_fraction=wait / (n * wall),
        wait_p50_ms=float(pct[0]),
        wait_p95_ms=float(pct[1]),
        wait_p99_ms=float(pct[2]),
        wait_max_ms=float(waits.max() * 1000.0),
        time_to_first_batch_s=None if None in firsts else max(firsts),  # type: ignore[type-var]
        epoch_boundary_wait_ms=epoch_boundary_wait_ms([r for run in runs for r in run.log.rows]),
    )
    metrics = replace(metrics, **trainer_host(runs, per_rank, [s.compute for s in splits], wall))
    if synchronous:  # in step, every rank delivers alike: the slowest is the one the others waited for
        slowest = min(ranks, key=lambda f: (f.peer_wait_s, -f.wait_s, f.rank))
    else:
        slowest = min(ranks, key=lambda f: (f.samples_per_s, f.rank))
    fastest = max(f.samples_per_s for f in ranks)
    released = [run.released_at for run in runs]
    free = [f.free_running_au for f in ranks]
    return Aggregate(
        start=start,
        end=end,
        ranks=ranks,
        metrics=metrics,
        skew=fastest / slowest.samples_per_s if slowest.samples_per_s > 0 else None,
        slowest=slowest,
        alignment_s=max(released) - min(released),
        log=merged_log(runs, start, end),
        synchronous=synchronous,
        steps=min(len(rank_rows) for rank_rows in per_rank),
        peer_wait_fraction=sum(s.peer_wait for s in splits) / (n * wall),
        allreduce_fraction=sum(s.allreduce for s in splits) / (n * wall),
        free_running_au=None if None in free else float(np.mean(free)),  # type: ignore[arg-type]
        dropped_batches=sum(run.log.dropped_batches for run in runs),
    )
