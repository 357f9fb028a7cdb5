"""What one rank of a multi-rank cell sends rank 0, and the cell's one step log of every rank: the
job's figures come from analysis/job.py, as a probed job's do.

Every rank's step rows count from one instant, the barrier that released all the loaders together
(measure.py), so the rows of different ranks share a clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from iobench.analysis.job import RankInput
from iobench.cell.records import StepLog
from iobench.results.figures import CacheState, StepAlone, Verdict, Window
from iobench.results.known import every_known
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
    warmup_method: str
    released_at: float  # time.time() as the barrier released it (measure.py)
    window: Window | None = None  # what it measured after its warm-up (measure.py)
    cache_state: CacheState | None = None  # its host's, from the first rank on the host
    # the trainer's host (docs/method.md): its step timed alone (one rank of a host at a time), how
    # its device busy was measured, and whether its loader's readers ran in its process
    alone: StepAlone | None = None
    au_basis: str | None = None
    readers_in_process: bool = False

    def as_input(self) -> RankInput:
        """The rank as the job's figures take it (analysis/job.py)."""
        return RankInput(
            rank=self.rank,
            local_rank=self.local_rank,
            node_rank=self.node_rank,
            host=self.host,
            rows=self.log.rows,
            measured_stats=self.log.measured_stats,
            epoch_stats=self.log.epoch_stats,
            bound=self.verdict.bound,
            binding_stage=self.verdict.binding_stage,
            released_at=self.released_at,
            time_to_first_batch_s=self.log.time_to_first_batch_s,
            alone=self.alone,
            au_basis=self.au_basis,
            readers_in_process=self.readers_in_process,
            cache=self.cache_state.achieved if self.cache_state else None,
            dropped_batches=self.log.dropped_batches,
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
    firsts = every_known(run.log.time_to_first_batch_s for run in runs)
    log.time_to_first_batch_s = max(firsts) if firsts else None
    log.epochs_completed = min(run.log.epochs_completed for run in runs)
    log.dropped_batches = sum(run.log.dropped_batches for run in runs)
    log.measure_start, log.measure_end = first.created_at + start, first.created_at + end
    return log
