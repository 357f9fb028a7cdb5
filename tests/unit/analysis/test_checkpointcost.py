"""Checkpoint costs from the ledger: blocked, slowed and clean steps, AU with and without."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iobench.analysis.checkpointcost import checkpoint_cost, transfer
from iobench.analysis.checkpointverdict import needed_gb_per_s
from iobench.results.figures import ACCOUNT_PARTS, StepAccount


def _step(i: int, start: float, device: float, checkpoint: float = 0.0, extra: float = 0.0) -> StepAccount:
    parts = dict.fromkeys(ACCOUNT_PARTS, 0.0)
    parts.update(device=device, fetch=extra, checkpoint=checkpoint)
    return StepAccount(
        rank=0,
        epoch=0,
        step=i,
        warmup=False,
        start_s=start,
        end_s=start + sum(parts.values()),
        samples=1,
        bytes_read=0,
        **parts,
    )


def test_blocked_slowed_and_clean_steps_are_told_apart():
    steps, t = [], 0.0
    for i in range(12):
        blocked = 0.5 if i in (3, 7) else 0.0
        extra = 0.05 if i in (4, 5) else 0.0  # beside the background write of the save at step 3
        steps.append(_step(i, t, 0.1, blocked, extra))
        t = steps[-1].end_s
    background = [(steps[4].start_s, steps[5].end_s - 1e-9)]
    cost = checkpoint_cost(steps, background, every_steps=4, saves=2)
    assert cost is not None
    assert cost.blocked_s_per_save == pytest.approx(0.5) and cost.slowed_steps == 2
    assert cost.slowed_step_ratio == pytest.approx(0.15 / 0.1)
    assert cost.au_without == pytest.approx(1.0) and cost.au_with == pytest.approx(1.2 / t)
    assert cost.cost == pytest.approx(cost.au_without - cost.au_with)
    assert cost.clean_step_s == pytest.approx(0.1)


@given(st.floats(1e6, 1e13), st.integers(1, 10_000), st.floats(0.01, 10.0), st.floats(0.001, 0.5))
def test_the_rate_a_target_overhead_needs_meets_it_exactly(nbytes, every, step_s, overhead):
    rate = needed_gb_per_s(nbytes, every, step_s, overhead) * 1e9
    blocked = nbytes / rate
    assert math.isclose(blocked / (every * step_s + blocked), overhead, rel_tol=1e-9)


def test_per_node_rates_take_the_slowest_rank_of_each_node():
    fig = transfer([[2.0], [4.0], [1.0], [1.0]], [[4e9], [4e9], [2e9], [2e9]], [0.01, 0.02], ranks_per_node=2)
    assert fig.gb_per_s_per_node == pytest.approx((8 / 4 + 4 / 1) / 2)
    assert fig.gb_per_s_per_rank == pytest.approx((2 + 1 + 2 + 2) / 4)
    assert fig.seconds_max == 4.0 and fig.bytes == int(12e9)
