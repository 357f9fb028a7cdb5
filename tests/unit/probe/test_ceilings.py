"""The probe's step alone from replayed steps: the median step, and the CPU of a median step."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iobench.probe.ceilings import REPLAY_WARMUP, step_alone
from iobench.probe.steps import Step


def _replayed(walls: list[float], busy: list[float]) -> list[Step]:
    """Back-to-back replayed steps of ``walls`` seconds, each busy on the CPU ``busy`` of its wall."""
    steps, t = [], 0.0
    for i, (wall, share) in enumerate(zip(walls, busy, strict=True)):
        steps.append(Step(i, 0, t, t, t + wall, 32, 1, cpu_s=wall * share))
        t += wall
    return steps


def _alone(steps: list[Step]):
    alone = step_alone(steps, {}, lambda s: 0.0)
    assert alone is not None
    return alone


def test_a_preempted_step_moves_neither_the_median_step_nor_its_cpu():
    # a 1 ms step on one core; one of them preempted for 40 ms, its CPU stayed 1 ms
    walls = [0.001] * (REPLAY_WARMUP + 30)
    walls[REPLAY_WARMUP + 10] = 0.041
    busy = [1.0] * len(walls)
    busy[REPLAY_WARMUP + 10] = 0.001 / 0.041
    alone = _alone(_replayed(walls, busy))
    assert alone.period_s == pytest.approx(0.001)
    assert alone.cpu_s == pytest.approx(0.001)
    assert alone.samples_per_s == pytest.approx(32_000)


def test_a_slow_step_that_burned_cpu_does_not_inflate_the_cpu_of_a_median_step():
    # a step that ran 10x long on the CPU (a collection, a page-fault storm): the mean of the CPU per
    # step would carry it; the trainer's work per step is what its median step burns
    walls = [0.001] * (REPLAY_WARMUP + 20) + [0.010]
    alone = _alone(_replayed(walls, [1.0] * len(walls)))
    mean_cpu = (20 * 0.001 + 0.010) / 21
    assert alone.cpu_s == pytest.approx(0.001) and alone.cpu_s < 0.8 * mean_cpu


@given(
    walls=st.lists(st.floats(1e-4, 0.05), min_size=REPLAY_WARMUP + 6, max_size=60),
    share=st.floats(0.05, 4.0),
)
def test_the_cpu_of_a_median_step_is_the_replay_s_cpu_share_of_it(walls, share):
    alone = _alone(_replayed(walls, [share] * len(walls)))
    assert alone.cpu_s == pytest.approx(share * alone.period_s, rel=1e-9)
