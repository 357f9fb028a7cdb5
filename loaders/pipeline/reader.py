"""One reader's pipeline, composed of the stage nodes: the same stages, seeds and order in every
backend, so that with the same settings they deliver the same samples in the same order.

    shards:   ShardSamples (the shard cursor) -> Shuffle (buffer + generator) -> Batcher (batch fill)
    objects:  Items -> Shuffle -> ObjectReads (reads in flight) -> Batcher

(the torchdata.nodes backend puts torchdata's mapper between the shuffle and the batcher).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from loaders.config import LoaderConfig, PipelineSpec
from loaders.formats.base import Sample
from loaders.pipeline.assemble import BatchBuffers
from loaders.pipeline.batcher import Batcher, Share
from loaders.pipeline.items import Items
from loaders.pipeline.node import Node
from loaders.pipeline.object_reads import ObjectReads
from loaders.pipeline.shard_samples import ShardSamples
from loaders.pipeline.shuffle import Shuffle
from loaders.plan import EpochPlan

if TYPE_CHECKING:
    from loaders.storage.sources import ShardSource


def reader_rng(seed: int, epoch: int, rank: int, reader: int) -> random.Random:
    """Reader ``reader`` of rank ``rank``'s generator for ``epoch``: it draws the shuffle's seed,
    then the augmentation's. Every backend's reader r draws from this one, so they agree."""
    return random.Random(hash((seed, epoch, rank, reader)))


def raw_samples(
    items: Sequence, source: ShardSource, spec: PipelineSpec, rng: random.Random, *, objects: bool = False
) -> Node[Sample]:
    """One reader's samples in shuffled order (a node: iterate it, or reset it to a state). ``items``
    are shard URLs or :class:`loaders.plan.Part` s, or with ``objects=True`` (key, url, label) of one
    object per sample, shuffled as such before their bytes are read. Draws the shuffle's seed from
    ``rng`` now, so the caller's later draws are the same on every backend."""
    seed = rng.getrandbits(64)
    if objects:
        shuffled = Shuffle(Items(items), spec.shuffle_buffer, seed)
        return ObjectReads(shuffled, source, source.spec.concurrency)
    return Shuffle(
        ShardSamples(items, source, spec.max_member_bytes, spec.on_error), spec.shuffle_buffer, seed
    )


def reader_spec(config: LoaderConfig, plan: EpochPlan) -> PipelineSpec:
    """An even split reads exactly its samples: a batch short of skipped (corrupt) samples is
    delivered short rather than dropped, so the count stays exact."""
    return config.pipeline if plan.split == "shards" else replace(config.pipeline, drop_last=False)


def reader_batches(
    config: LoaderConfig,
    plan: EpochPlan,
    reader: int,
    source: ShardSource,
    *,
    buffers: BatchBuffers | None = None,
    alive: Callable[[], bool] | None = None,
) -> Batcher:
    """Reader ``reader``'s share of ``plan`` as its batches (a DataLoader worker's, a reader
    thread's): from its start, or ``reset`` to a state (a batch's ``bookkeeping.resume``)."""
    mine = plan.readers[reader]
    rng = reader_rng(config.pipeline.seed, plan.epoch, plan.rank, reader)
    spec = reader_spec(config, plan)
    samples = raw_samples(mine.items, source, spec, rng, objects=config.layout == "objects")
    owed = mine.batches if plan.split == "samples" else None
    return Batcher(
        samples,
        spec,
        rng.getrandbits(64),
        share=Share(reader, plan.epoch, owed),
        buffers=buffers,
        drain=source.drain_into,
        alive=alive,
    )
