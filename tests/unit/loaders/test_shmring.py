"""Reused batch buffers: a slot comes back only when no tensor views it, and a consumer that keeps
batches never sees them overwritten."""

from __future__ import annotations

import gc

import pytest
import torch

from loaders import make_loader
from loaders.pipeline.shmring import FREE, TAKEN, ShmRing
from tests.helpers.shardkit import make_shards, small_config


def test_slot_is_freed_only_when_the_last_view_dies():
    ring = ShmRing(workers=2, slots_per_worker=2, slot_bytes=4096)
    slot = ring.acquire(1)
    assert slot in (2, 3)  # worker 1 takes only its own slots
    images = ring.tensor(slot, (4, 8, 8, 3)).permute(0, 3, 1, 2)
    view = images[1:3]
    as_numpy = view.numpy()
    del images, view
    gc.collect()
    assert ring.state[slot] == TAKEN
    del as_numpy
    gc.collect()
    assert ring.state[slot] == FREE


def test_a_worker_without_free_slots_gets_none():
    ring = ShmRing(workers=1, slots_per_worker=2, slot_bytes=64)
    assert [ring.acquire(0), ring.acquire(0), ring.acquire(0)] == [0, 1, None]
    ring.release(0)
    assert ring.acquire(0) == 0


def _batches(urls, keep: bool):
    """(key -> image bytes) of one epoch, either kept as delivered or cloned at once."""
    loader = make_loader("torch", small_config(urls, workers=2, batch_size=4, prefetch=1, seed=3))
    held, images = [], {}
    for batch in loader:
        held.append(batch if keep else None)
        for key, image in zip(batch.keys, batch.images if keep else batch.images.clone(), strict=True):
            images[key] = image
    return images, loader.stats.counters


def test_kept_batches_are_never_overwritten_by_later_ones(tmp_path):
    urls = make_shards(tmp_path, n_shards=4, per_shard=20)
    kept, counters = _batches(urls, keep=True)
    copied, _ = _batches(urls, keep=False)
    # a consumer holding all 20 batches outgrows the 5 slots per worker: the rest went through
    # torch's own shared memory, and every image is the one first delivered
    assert counters.ring_fallback_batches > 0
    assert kept.keys() == copied.keys()
    for key in kept:
        assert torch.equal(kept[key], copied[key]), key


def test_two_iterators_of_one_loader_each_keep_their_own_ring(tmp_path):
    # without persistent workers each iteration has workers and a ring of its own
    urls = make_shards(tmp_path, n_shards=4, per_shard=10)
    cfg = small_config(urls, workers=2, batch_size=4, prefetch=1, options={"persistent_workers": False})
    loader = make_loader("torch", cfg)
    first = iter(loader)
    a = list(next(first).keys)  # keys only: no batch keeps the first ring alive
    second = iter(loader)  # replaces the loader's ring while the first epoch's batches are in transit
    b = list(next(second).keys)
    gc.collect()
    a += [k for batch in first for k in batch.keys]
    b += [k for batch in second for k in batch.keys]
    assert sorted(a) == sorted(b) and len(set(a)) == 40


def test_a_second_iteration_of_a_persistent_loader_ends_the_first_with_a_reason(tmp_path):
    urls = make_shards(tmp_path, n_shards=4, per_shard=10)
    loader = make_loader("torch", small_config(urls, workers=2, batch_size=4, prefetch=1))
    first = iter(loader)
    next(first)
    second = iter(loader)
    assert len([k for b in second for k in b.keys]) == 40  # the newer iteration reads a whole epoch
    with pytest.raises(RuntimeError, match="one iteration at a time"):
        next(first)
