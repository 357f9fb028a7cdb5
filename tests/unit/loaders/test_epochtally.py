"""Epochs that count their samples: the plan's count against what was delivered, and the loss
budget, over every way the plan splits an epoch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.epochtally import EpochTally, SamplesLostError, expected_samples
from loaders.observe.losses import Loss
from loaders.observe.stages import StageStats
from loaders.plan import plan_epoch


@settings(max_examples=80, deadline=None)
@given(
    counts=st.lists(st.integers(1, 50), min_size=1, max_size=12),
    world=st.integers(1, 4),
    readers=st.integers(1, 4),
    batch=st.integers(1, 16),
    drop_last=st.booleans(),
)
def test_the_expected_count_is_what_the_plan_delivers(counts, world, readers, batch, drop_last):
    """Each reader delivers its samples in batches (drop_last: whole ones only); the ranks together
    deliver the dataset less what the even split drops."""
    items = [f"s{i}" for i in range(len(counts))]
    try:
        plans = [
            plan_epoch(
                items,
                counts,
                rank=r,
                world_size=world,
                num_workers=readers,
                batch_size=batch,
                drop_last=drop_last,
            )
            for r in range(world)
        ]
    except ValueError:
        return  # too few samples for a batch per rank: refused by the plan itself
    for plan in plans:
        per_reader = [
            r.samples if not drop_last or plan.split == "samples" else r.samples // batch * batch
            for r in plan.readers
        ]
        assert expected_samples(plan, batch, drop_last) == sum(per_reader)
    assert sum(expected_samples(p, batch, drop_last) for p in plans) <= sum(counts)


def _stats(errors: int = 0, region: int = 0) -> StageStats:
    stats = StageStats()
    if errors:
        stats.add_error("corrupt_sample", "s3://b/train-000001.tar: sample '000011'")
        stats.errors["corrupt_sample"] = errors
    if region:
        stats.add_loss(Loss("s3://b/train-000003.tar", 1000, 9000, region, 4, "tar header checksum mismatch"))
    return stats


def test_the_budget_is_checked_as_the_readers_tell_and_at_the_end_against_the_plan():
    tally = EpochTally(epoch=2, expected=1000)
    tally.add(_stats(), 500)
    assert not tally.over(0.001) and tally.lost == 0
    tally.add(_stats(region=2), 498)
    assert tally.lost == 2 and tally.over(0.001) and not tally.over(0.01)
    said = str(tally.error(0.001))
    assert (
        "epoch 2 lost 2 of its 1,000 samples so far" in said
        and "s3://b/train-000003.tar bytes 1,000-9,000" in said
    )
    assert "max_lost_fraction=0.001" in said and "uploaded again" in said
    tally.ended = True  # a shortfall nobody told (a reader's own count gone wrong) counts at the end
    tally.delivered -= 7
    assert tally.lost == 9 and tally.over(0.005)
    assert EpochTally(0, None, delivered=3, skipped=3).over(0.0) is False  # no plan: nothing to judge
    assert isinstance(SamplesLostError(str(tally.error(0.001))), SamplesLostError)  # rebuilt from its message


def test_a_budget_outside_zero_to_one_is_refused():
    from loaders import PipelineSpec

    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="max_lost_fraction"):
            PipelineSpec(max_lost_fraction=bad)
    assert PipelineSpec(max_lost_fraction=None).max_lost_fraction is None
