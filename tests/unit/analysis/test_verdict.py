"""A synchronous job's verdict: straggler-bound when its ranks wait for the slowest more than for
their own data, all-reduce-bound when the modelled all-reduce costs more, else the stage timers'."""

from __future__ import annotations

from iobench.analysis.verdict import synchronous_verdict
from iobench.results.figures import Verdict

ONLINE = Verdict(bound="fetch", binding_stage="fetch", headline="fetch-bound", evidence=("the timers",))


def _verdict(**shares) -> Verdict:
    base = {"au": 0.3, "data_wait": 0.2, "peer_wait": 0.1, "allreduce": 0.05, "straggler_cost": 0.2}
    return synchronous_verdict(ONLINE, **{**base, **shares}, slowest="rank 3: its tier is slow", fabric="ib")


def test_waiting_for_peers_most_is_straggler_bound_naming_the_slowest():
    v = _verdict(peer_wait=0.5)
    assert v.bound == "straggler" and "50 % of the time for the slowest rank" in v.headline
    assert v.evidence[0] == "the timers" and any("rank 3: its tier is slow" in e for e in v.evidence)
    assert any("cost 0.20 of AU" in e for e in v.evidence)


def test_an_allreduce_longer_than_the_waits_is_allreduce_bound():
    v = _verdict(allreduce=0.6)
    assert v.bound == "allreduce" and "ib" in v.headline


def test_otherwise_the_stage_timers_verdict_stands_with_the_split_as_evidence():
    v = _verdict()
    assert v.bound == "fetch" and any("waiting for the slowest rank" in e for e in v.evidence)
    assert _verdict(au=0.95, peer_wait=0.9).bound == "fetch"  # accelerator-bound jobs are not stragglers
