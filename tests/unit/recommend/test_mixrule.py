"""How a cache and its backend share the reads: the two rules on hand-worked figures, the range
recommend shows, and a sweep's partial-hit cells narrowing it to the rule they measured."""

from __future__ import annotations

import pytest

from iobench.recommend.mixrule import MixCell, MixRule, fit
from iobench.recommend.model import backend_needed, concurrent_rate, mixed_rate


def test_the_two_rules_by_hand():
    # 60 % of the reads from a 54 GB/s NVMe cache, 40 % from a 2.5 GB/s backend
    assert mixed_rate(0.6, 54e9, 2.5e9) == pytest.approx(1 / (0.6 / 54e9 + 0.4 / 2.5e9))  # 5.84 GB/s
    assert concurrent_rate(0.6, 54e9, 2.5e9) == pytest.approx(2.5e9 / 0.4)  # 6.25 GB/s: the backend fills
    assert concurrent_rate(0.99, 10e9, 2.5e9) == pytest.approx(10e9 / 0.99)  # the cache fills first
    assert concurrent_rate(0.0, 54e9, 2.5e9) == 2.5e9 and concurrent_rate(1.0, 54e9, 2.5e9) == 54e9
    # the 40 TB case of unet3d on 8 B200 a node: 45.6 GB/s for AU 0.9 through a 54.4 GB/s cache holding
    # 30.72 of 40 TB (static): times add need 29.7 GB/s from the backend, concurrent service 10.6
    hit = 30.72 / 40
    assert backend_needed(45.6e9, hit, 54.4e9) == pytest.approx(29.7e9, rel=0.01)
    assert backend_needed(45.6e9, hit, 54.4e9, concurrent=True) == pytest.approx(10.6e9, rel=0.01)
    # a cache too slow for its share: no backend rate is enough under either rule
    assert (
        backend_needed(45.6e9, 0.9, 30e9) is None
        and backend_needed(45.6e9, 0.9, 30e9, concurrent=True) is None
    )


def test_the_range_until_a_sweep_narrows_it():
    rule = MixRule()  # as the lab measured: times add, concurrent service the far end
    assert rule.rate(0.6, 54e9, 2.5e9) == pytest.approx(mixed_rate(0.6, 54e9, 2.5e9))
    low, high = rule.range(0.6, 54e9, 2.5e9)
    assert (low, high) == (pytest.approx(mixed_rate(0.6, 54e9, 2.5e9)), pytest.approx(6.25e9))
    assert rule.needed_range(45.6e9, 0.768, 54.4e9) == (
        pytest.approx(10.6e9, rel=0.01),
        pytest.approx(29.7e9, rel=0.01),
    )
    narrowed = MixRule("concurrent", narrowed=True)
    assert narrowed.range(0.6, 54e9, 2.5e9) == (6.25e9, 6.25e9)


def _cells(rule: str, noise: float = 0.0) -> list[MixCell]:
    out = []
    for i, hit in enumerate((0.3, 0.6, 0.9)):
        c = MixCell("run", f"h{i}", 4, hit, 1.0, 20_000.0, 1_800.0)
        measured = c.predicted(rule) * (1 + (noise if i % 2 else -noise))
        out.append(MixCell("run", f"h{i}", 4, hit, measured, 20_000.0, 1_800.0))
    return out


@pytest.mark.parametrize("rule", ["harmonic", "concurrent"])
def test_a_sweep_that_measured_one_rule_narrows_the_range_to_it(rule):
    got = fit(_cells(rule, noise=0.05))
    assert got.rule == rule and got.narrowed and "3 partial-hit cell(s) of --results (run)" in got.said


def test_a_sweep_that_pins_neither_rule_leaves_the_range():
    # between the two: 0.9 of the reads from the cache, the measurement halfway
    cells = [MixCell("run", "h", 4, 0.9, 12_000.0, 20_000.0, 1_800.0)]
    got = fit(cells)
    assert got.rule == "harmonic" and not got.narrowed and "--results did not narrow it" in got.said
    assert fit([]) == MixRule()
