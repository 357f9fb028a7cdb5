"""The batcher ends its stream: counters drained at every call (a store's request counters) never
turn into batches after the last sample, and a reader owed batches by an even split pads with
empty ones and then stops."""

from __future__ import annotations

import random
from itertools import islice

from loaders.config import PipelineSpec
from loaders.observe import LoaderCounters, RequestCounts
from loaders.observe.stages import StageStats
from loaders.pipeline import raw_samples
from loaders.pipeline.batcher import Batcher, Share
from loaders.storage import ShardSource, SourceSpec
from tests.helpers.shardkit import make_shards


def _counting_drain(stats: StageStats) -> None:
    # what an object store's source does: its request counters, present (even at 0) at every drain
    stats.counters.merge(LoaderCounters(requests=RequestCounts()))


def _batcher(tmp_path, share: Share | None = None) -> Batcher:
    urls = make_shards(tmp_path, n_shards=2, per_shard=10)
    spec = PipelineSpec(batch_size=8, shuffle_buffer=0)
    samples = raw_samples(urls, ShardSource(SourceSpec()), spec, random.Random(0))
    return Batcher(samples, spec, seed=0, share=share or Share(), drain=_counting_drain)


def test_the_stream_ends_after_its_last_sample_though_every_drain_brings_counters(tmp_path):
    batches = list(islice(_batcher(tmp_path), 10))
    assert [len(b) for b in batches] == [8, 8, 4]


def test_a_reader_owed_batches_pads_with_empty_ones_then_stops(tmp_path):
    batches = list(islice(_batcher(tmp_path, Share(batches=5)), 10))
    assert [len(b) for b in batches] == [8, 8, 4, 0, 0]
