"""A multi-rank cell's figures: each rank over the interval every rank was measuring, their sum,
how unequal the ranks were, and which was slowest. Defined in docs/method.md (Multi-rank cells).

Every rank's step rows count from one instant, the barrier that released all the loaders together
(measure.py), so the rows of different ranks share a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iobench.cell.steploop import StepLog
from iobench.results.figures import CacheState, PipelineMetrics, RankFigures, StepRow, Verdict
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
    cache_state: CacheState | None = None  # its host's, from the first rank on the host


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


def times_inside(rows: list[StepRow], start: float, end: float) -> tuple[float, float, float]:
    """Seconds of waiting, host-to-device copy and compute that fell inside [start, end]: a step
    runs wait, then h2d, then compute, so each part is clipped to the interval (fractions of the
    interval then never exceed 1, however the ranks' steps straddle its edges)."""
    wait = h2d = compute = 0.0
    for r in rows:
        wait += _overlap(r.t_start, r.t_start + r.wait_s, start, end)
        h2d += _overlap(r.t_start + r.wait_s, r.t_start + r.wait_s + r.h2d_s, start, end)
        compute += _overlap(r.t_end - r.compute_s, r.t_end, start, end)
    return wait, h2d, compute


def rank_figures(run: RankRun, start: float, end: float) -> RankFigures:
    rows = counted(run.log.rows, start, end)
    wall = end - start
    samples = sum(r.samples for r in rows)
    bytes_read = sum(r.bytes_read for r in rows)
    wait, _, compute = times_inside(run.log.rows, start, end)
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
        wait_s=wait,
        compute_s=compute,
        au=compute / wall,
        stall_fraction=wait / wall,
        wait_p99_ms=float(np.percentile([r.wait_s * 1000.0 for r in rows], 99)) if rows else None,
        warmup_steps=sum(r.warmup for r in run.log.rows),
        verdict=run.verdict.bound,
        binding_stage=run.verdict.binding_stage,
        cache=run.cache_state.achieved if run.cache_state else None,
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


def aggregate(runs: list[RankRun]) -> Aggregate:
    """The job's figures from its ranks' runs (one run per rank, in rank order)."""
    start, end = common_interval(runs)
    wall = end - start
    ranks = [rank_figures(run, start, end) for run in runs]
    rows = [r for run in runs for r in counted(run.log.rows, start, end)]
    n = len(runs)
    samples = sum(r.samples for r in rows)
    bytes_read = sum(r.bytes_read for r in rows)
    inside = [times_inside(run.log.rows, start, end) for run in runs]
    wait, h2d, compute = (sum(t[i] for t in inside) for i in range(3))
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
    )
    slowest = min(ranks, key=lambda f: (f.samples_per_s, f.rank))
    fastest = max(f.samples_per_s for f in ranks)
    released = [run.released_at for run in runs]
    return Aggregate(
        start=start,
        end=end,
        ranks=ranks,
        metrics=metrics,
        skew=fastest / slowest.samples_per_s if slowest.samples_per_s > 0 else None,
        slowest=slowest,
        alignment_s=max(released) - min(released),
        log=merged_log(runs, start, end),
    )
