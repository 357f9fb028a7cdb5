"""The thread backend: the DataLoader backend's reader streams, as threads of this process."""

from __future__ import annotations

import threading

import pytest
import torch

from loaders import AugmentSpec, LoaderConfig, SampleError, make_loader
from loaders.backends import ThreadLoader
from tests.helpers.shardkit import (
    ALL_KEYS,
    make_shards,
    shard_with_a_corrupt_jpeg,
    small_config,
    tiny_jpeg,
)


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("shards"), n_shards=4, per_shard=10)


def _by_reader(batches) -> dict[int, list]:
    readers: dict[int, list] = {}
    for batch in batches:
        readers.setdefault(batch.reader, []).append(batch)
    return readers


def _readers_alive() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("loaders-reader-")]


@pytest.mark.parametrize("workers", [2, 3])
def test_each_reader_delivers_the_dataloader_workers_batches(urls, workers):
    threads = make_loader("threads", small_config(urls, workers=workers))
    processes = make_loader("torch", small_config(urls, workers=workers))
    assert isinstance(threads, ThreadLoader) and len(threads) == len(processes)
    for epoch in range(2):
        threads.set_epoch(epoch)
        processes.set_epoch(epoch)
        ours, theirs = _by_reader(threads), _by_reader(processes)
        assert sorted(ours) == sorted(theirs) == list(range(workers))
        for reader, batches in ours.items():
            assert [b.keys for b in batches] == [b.keys for b in theirs[reader]]
            assert all(torch.equal(a.images, b.images) for a, b in zip(batches, theirs[reader], strict=True))
    assert threads.stats.samples == 80 and threads.stats.cpu_s["decode"] > 0
    assert all(b.made[0] < b.made[1] for b in ours[0])  # production times, as the workers stamp them
    processes.close()


def test_a_consumer_that_stops_early_stops_the_readers(urls):
    loader = make_loader("threads", small_config(urls, workers=2, prefetch=1))
    for _ in loader:
        break
    assert _readers_alive() == []  # joined when the epoch's iterator closed
    loader.set_epoch(1)
    assert sorted(k for b in loader for k in b.keys) == ALL_KEYS


def test_a_readers_error_reaches_the_consumer_and_no_reader_is_left(tmp_path):
    bad = shard_with_a_corrupt_jpeg(tmp_path / "train-000000.tar", range(9), corrupt=2, label=7)
    good = make_shards(tmp_path / "good", n_shards=1, per_shard=9, start=100)
    with pytest.raises(SampleError, match=r"train-000000\.tar.*'000002'"):
        list(make_loader("threads", small_config([bad, *good], workers=2, on_error="fail")))
    assert _readers_alive() == []
    skipping = make_loader("threads", small_config([bad, *good], workers=2, max_lost_fraction=None))
    assert sum(len(b) for b in skipping) == 17 and skipping.stats.errors == {"corrupt_sample": 1}


def test_objects_read_as_the_dataloader_workers_read_them(tmp_path):
    objects = []
    for i in range(12):
        path = tmp_path / f"{i:06d}.jpg"
        path.write_bytes(tiny_jpeg(i))
        objects.append((f"{i:06d}", str(path), i % 1000))
    cfg = LoaderConfig(
        objects=objects, batch_size=4, workers=2, shuffle_buffer=8, augment=AugmentSpec(size=32)
    )
    ours = _by_reader(make_loader("threads", cfg))
    theirs = _by_reader(make_loader("torch", cfg))
    assert {r: [b.keys for b in bs] for r, bs in ours.items()} == {
        r: [b.keys for b in bs] for r, bs in theirs.items()
    }
    assert sorted(k for bs in ours.values() for b in bs for k in b.keys) == [k for k, _, _ in objects]
