"""Epochs that count their samples: how many an epoch of one rank should deliver (its plan), how many
it did, what was lost on the way (samples skipped as corrupt, regions of shards skipped as
damaged), and the loss budget past which a loader stops rather than train on a fraction of the
data (``max_lost_fraction``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loaders.observe.losses import Loss
from loaders.observe.stages import StageStats
from loaders.plan import EpochPlan


class SamplesLostError(RuntimeError):
    """An epoch lost more of its samples than the loader's budget allows. Constructible from its
    message alone (torch re-raises a worker's exception as ``type(message)``)."""


def expected_samples(plan: EpochPlan, batch_size: int, drop_last: bool) -> int | None:
    """The samples ``plan`` delivers to this rank, where its shards' counts are known: an even
    split's exactly; whole shards per reader, less what drop_last drops of each reader's last batch."""
    if plan.samples is None:
        return None
    if plan.split == "samples":
        return plan.samples
    known = [r.samples for r in plan.readers if r.samples is not None]
    if len(known) < len(plan.readers):
        return None
    if not drop_last:
        return sum(known)
    return sum(n // batch_size * batch_size for n in known)


@dataclass
class EpochTally:
    """One epoch of one rank as it goes: ``expected`` (None: not known), delivered so far, and the
    samples its readers said they lost (skipped as corrupt, or in regions skipped as damaged)."""

    epoch: int
    expected: int | None
    delivered: int = 0
    skipped: int = 0
    losses: list[Loss] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    def add(self, stats: StageStats, samples: int) -> None:
        """A batch of ``samples`` delivered (0: counters only) with its ``stats``."""
        self.delivered += samples
        lost = stats.counters.lost
        self.skipped += (lost.samples if lost else 0) + sum(stats.errors.values())
        self.losses.extend(stats.losses[: max(0, 5 - len(self.losses))])
        self.examples.extend(stats.error_examples[: max(0, 3 - len(self.examples))])

    ended: bool = False  # read to its end: its shortfall against the plan is known

    @property
    def lost(self) -> int:
        """Samples this epoch has not delivered: what its readers said so far; once it ended, at
        least its shortfall against the plan."""
        if not self.ended or self.expected is None:
            return self.skipped
        return max(self.skipped, self.expected - self.delivered)

    def over(self, budget: float | None) -> bool:
        """Whether the epoch has lost more than ``budget`` of its expected samples."""
        expected = self.expected
        if budget is None or not expected:
            return False
        return self.lost > budget * expected

    def error(self, budget: float) -> SamplesLostError:
        where = "; ".join(loss.describe() for loss in self.losses[:3]) or "; ".join(self.examples)
        so_far = "" if self.ended else " so far"
        return SamplesLostError(
            f"epoch {self.epoch} lost {self.lost:,} of its {self.expected:,} samples{so_far} "
            f"({100 * self.lost / max(1, self.expected or 1):.2f} %), over the loss budget "
            f"max_lost_fraction={budget:g}: {where or 'see the loader stats errors'}. Check and repair "
            "the shard (a damaged cache entry is fetched again by itself; a damaged shard in the store "
            "must be uploaded again), or, if training on fewer samples is acceptable, raise "
            "max_lost_fraction (docs/loaders.md: choosing a loss budget)"
        )
