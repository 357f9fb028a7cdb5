"""The loader's typed counters: summing them is a commutative monoid whose sum equals the parts'
flat counts added up (as a Counter of the flat names did), and the flat form summaries carry reads
back to the same counters, through StageStats and a whole CellSummary alike."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from functools import reduce

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.results.codec import RecordError, from_json, to_json
from iobench.results.figures import LoaderStats
from iobench.results.summary import CellSummary
from loaders.observe import (
    FAULT_KINDS,
    CacheHealthCounts,
    CacheStats,
    LoaderCounters,
    LossCounts,
    RequestCounts,
    StageStats,
    ThrottleCounts,
)
from loaders.storage.faults import KIND_WORDS
from tests.helpers.paths import ROOT

counts = st.integers(min_value=0, max_value=10**12)
# seconds as whole milliseconds: float sums then do not depend on the order they are added in
seconds = st.integers(min_value=0, max_value=10**7).map(lambda ms: ms / 1024)


def _group(cls: type) -> st.SearchStrategy:
    kinds = {f.name: (seconds if f.type == "float" else counts) for f in dataclasses.fields(cls)}
    return st.builds(cls, **{name: kinds[name] for name in cls.FLAT})


requests = st.builds(
    RequestCounts,
    **{name: (seconds if name.endswith("_s") else counts) for name in RequestCounts.FLAT},
    faults=st.dictionaries(st.sampled_from(FAULT_KINDS), counts),
    by_endpoint=st.dictionaries(st.integers(0, 7), counts),
)
loader_counters = st.builds(
    LoaderCounters,
    requests=st.none() | requests,
    cache=st.none() | _group(CacheStats),
    cache_health=st.none() | _group(CacheHealthCounts),
    throttle=st.none() | _group(ThrottleCounts),
    lost=st.none() | _group(LossCounts),
    ring_fallback_batches=counts,
    epoch_samples_expected=st.none() | counts,
    epoch_samples_lost=counts,
)


def _sum(*parts: LoaderCounters) -> LoaderCounters:
    return reduce(lambda total, part: total.merge(part) or total, parts, LoaderCounters())


@settings(max_examples=150, deadline=None)
@given(loader_counters, loader_counters, loader_counters)
def test_summing_is_associative_and_commutative_and_leaves_the_parts_alone(a, b, c):
    before = [x.copy() for x in (a, b, c)]
    left = _sum(_sum(a, b), c)
    assert left == _sum(a, _sum(b, c)) == _sum(c, b, a) == _sum(b, a, c)
    assert _sum(a, LoaderCounters()) == a == _sum(LoaderCounters(), a)
    assert [a, b, c] == before  # a sum owns what it holds: merging into it later changes no part
    left.merge(left.copy())
    assert [a, b, c] == before


@settings(max_examples=150, deadline=None)
@given(st.lists(loader_counters, max_size=4))
def test_the_sum_is_the_parts_flat_counts_added_up(parts):
    """What the open Counter of flat names did: the sum's names are the union of the parts', each
    the sum of its counts."""
    added: Counter = Counter()
    for part in parts:
        added.update(part.as_flat())
    assert _sum(*parts).as_flat() == dict(added)


@settings(max_examples=150, deadline=None)
@given(loader_counters)
def test_the_flat_form_reads_back_the_same_counters(counters):
    flat = counters.as_flat()
    assert LoaderCounters.from_flat(json.loads(json.dumps(flat))) == counters
    assert bool(counters) == bool(flat)


@settings(max_examples=50, deadline=None)
@given(st.lists(loader_counters, min_size=1, max_size=3))
def test_a_stage_stats_summary_written_and_read_back_round_trips(parts):
    """Workers' StageStats merged, written as a summary's loader stats, and read back: the same
    counters, in the flat names old summaries carry."""
    stats = StageStats()
    for part in parts:
        stats.merge(StageStats(counters=part))
    written = json.loads(json.dumps(stats.as_dict()))
    assert written["counters"] == stats.counters.as_flat()
    summary = CellSummary(
        status="failed", cell=_cell(), error="x", loader_stats_all_steps=from_json(LoaderStats, written)
    )
    back = from_json(CellSummary, json.loads(json.dumps(to_json(summary))))
    assert back.loader_stats_all_steps.counters == stats.counters == _sum(*parts)
    assert back == summary


def _cell():
    data = json.loads(next((ROOT / "tests/data/v3-run").glob("*/summary.json")).read_text())
    return from_json(CellSummary, data).cell


def test_old_run_directories_read_their_counters():
    """Summaries on disk carry the flat names: every one under tests/data still loads."""
    found = sorted((ROOT / "tests/data").rglob("summary.json"))
    assert found
    for path in found:
        summary = from_json(CellSummary, json.loads(path.read_text()))
        flat = json.loads(path.read_text())["loader_stats_all_steps"]["counters"]
        assert summary.loader_stats_all_steps.counters.as_flat() == flat


def test_a_summary_of_an_older_version_reads_its_flat_names_into_the_groups():
    flat = {
        "requests": 12,
        "retries": 2,
        "request_failures": 0,
        "bytes_transferred": 4096,
        "fault_timeout": 1,
        "fault_connection_reset": 1,
        "endpoint_1_requests": 12,
        "cache_hits": 3,
        "cache_misses": 1,
        "cache_wait_s": 0.5,
        "throttle_requests": 1,
        "lost_bytes": 512,
        "epoch_samples_expected": 256,
        "a_counter_of_a_newer_version": 7,
    }
    c = LoaderStats(counters=from_json(LoaderStats, {"counters": flat}).counters).counters
    assert c.requests == RequestCounts(
        requests=12,
        retries=2,
        bytes_transferred=4096,
        faults={"timeout": 1, "connection_reset": 1},
        by_endpoint={1: 12},
    )
    assert c.cache == CacheStats(hits=3, misses=1, wait_s=0.5)
    assert c.throttle == ThrottleCounts(requests=1) and c.lost == LossCounts(bytes=512)
    assert c.cache_health is None and c.epoch_samples_expected == 256 and c.ring_fallback_batches == 0


@pytest.mark.parametrize("value", ["3", 1.5, True, None, [1]])
def test_a_counter_that_is_not_a_count_is_an_error_naming_it(value):
    with pytest.raises(RecordError, match=r"LoaderStats\.counters: counter 'cache_hits'"):
        from_json(LoaderStats, {"counters": {"cache_hits": value}})


def test_every_fault_kind_has_its_words():
    assert set(KIND_WORDS) == set(FAULT_KINDS)
