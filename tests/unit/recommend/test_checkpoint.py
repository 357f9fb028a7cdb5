"""Checkpoint sizing: the rates a placement needs meet the accepted share exactly, a placement is
said to meet it exactly when it does, and every figure carries its source."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iobench.recommend.checkpoint import Sourced, parse_duration, size_checkpoints, state_of, write_rate


def _sizing(state=912e9, every=1800.0, overhead=0.01, accelerators=64, per_node=8, rates=None, local=None):
    return size_checkpoints(
        Sourced(state, "s"),
        Sourced(every, "e"),
        Sourced(overhead, "o"),
        accelerators,
        Sourced(per_node, "n"),
        rates or {},
        local,
    )


@given(
    state=st.floats(1e9, 2e13),
    every=st.floats(60, 86400),
    overhead=st.floats(0.001, 0.2),
    accelerators=st.integers(1, 4096),
    rate=st.floats(1e8, 1e11),
)
def test_a_placement_meets_the_share_exactly_when_its_blocked_time_does(
    state, every, overhead, accelerators, rate
):
    s = _sizing(state, every, overhead, accelerators, rates={"shared": Sourced(rate, "r")})
    b = s.bytes_per_node / s.sync_rate_per_node
    assert b / (every + b) == pytest.approx(overhead, rel=1e-9)
    sync = next(p for p in s.placements if p.name == "shared, sync")
    assert sync.meets == (rate >= s.sync_rate_per_node * (1 - 1e-12) or sync.overhead <= overhead)
    assert s.sync_rate_cluster == pytest.approx(s.sync_rate_per_node * s.nodes)


def test_seventy_b_every_thirty_minutes_on_64_h100():
    s = _sizing(rates={"local": Sourced(6e9, "fio"), "shared": Sourced(5e9, "given")}, local="local")
    assert s.nodes == 8 and s.bytes_per_node == pytest.approx(114e9)
    assert s.sync_rate_per_node == pytest.approx(114e9 / (0.01 / 0.99 * 1800))
    names = [p.name for p in s.placements]
    assert (
        "local, sync" not in names and "local staging, then shared" in names
    )  # a node's disk is staging only
    assert s.answer.startswith("shared, async_pinned")


def test_inputs_carry_their_sources(tmp_path):
    assert parse_duration("30min") == 1800 and parse_duration("2h") == 7200 and parse_duration("90") == 90
    assert "MLPerf Storage" in state_of("llama3-70b", None, None).source
    assert state_of(None, "70B", None).value == pytest.approx(70e9 * 14)
    fio = tmp_path / "w.json"
    fio.write_text(json.dumps({"jobs": [{"write": {"bw_bytes": 2.2e9}}]}))
    assert write_rate(str(fio)) == Sourced(2.2e9, "fio write, w.json")
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration("soon")
