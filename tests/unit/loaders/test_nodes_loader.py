"""The torchdata.nodes backend: same samples as the DataLoader backend, errors, objects, resume."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

pytest.importorskip("torchdata.nodes")

from loaders import AugmentSpec, LoaderConfig, SampleError, make_loader
from loaders.backends.nodes_loader import NodesLoader
from tests.helpers.shardkit import (
    ALL_KEYS,
    key_label_pairs,
    label_of,
    make_shards,
    shard_with_a_corrupt_jpeg,
    small_config,
    tiny_jpeg,
)


def _cfg(urls=None, **kw) -> LoaderConfig:
    return small_config(urls, **{"workers": 2, **kw})


@pytest.fixture(scope="module")
def urls(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("shards"), n_shards=4, per_shard=10)


@pytest.mark.parametrize("method", ["thread", "process"])
def test_every_epoch_is_the_full_multiset_with_stats(urls, method):
    loader = make_loader("nodes", _cfg(urls, options={"method": method}))
    assert isinstance(loader, NodesLoader)
    for epoch in range(2):
        loader.set_epoch(epoch)
        batches = list(loader)
        assert [len(b) for b in batches] == [4] * 10
        assert all(b.images.dtype == torch.uint8 and b.images.shape[1:] == (3, 32, 32) for b in batches)
        assert key_label_pairs(batches) == Counter((k, label_of(k)) for k in ALL_KEYS)
    stats = loader.stats
    assert stats.samples == 80 and stats.bytes_read > 0
    assert all(stats.wall_s[stage] > 0 for stage in ("fetch", "decode", "augment", "collate"))


def test_nodes_equals_the_dataloader_with_one_reader_sample_for_sample(urls):
    # same shard order, shuffle and crops whatever the thread count: backends differ only in speed
    nodes = list(make_loader("nodes", _cfg(urls, workers=3)))
    torch_ = list(make_loader("torch", _cfg(urls, workers=0)))
    assert [b.keys for b in nodes] == [b.keys for b in torch_]
    assert all(torch.equal(a.images, b.images) for a, b in zip(nodes, torch_, strict=True))


def test_ranks_read_disjoint_samples_covering_the_dataset(urls):
    seen = Counter()
    for rank in range(2):
        seen.update(k for b in make_loader("nodes", _cfg(urls, rank=rank, world_size=2)) for k in b.keys)
    assert sorted(seen) == ALL_KEYS and set(seen.values()) == {1}


@pytest.mark.parametrize("k", [1, 4])
def test_resume_mid_epoch_continues_the_same_epoch_exactly(urls, k):
    cfg = _cfg(urls, workers=3, prefetch=4)
    first = make_loader("nodes", cfg)
    first.set_epoch(2)
    before = []
    for batch in first:  # the prefetcher has decoded batches beyond k: they must come again
        before.append(batch)
        if len(before) == k:
            break
    state = json.loads(json.dumps(first.state_dict()))
    assert state["epoch"] == 2 and state["delivered"] == k
    second = make_loader("nodes", cfg)
    second.load_state_dict(state)
    after = list(second)
    assert sorted(key for b in before + after for key in b.keys) == ALL_KEYS
    whole = make_loader("nodes", cfg)
    whole.set_epoch(2)
    reference = list(whole)
    assert [b.keys for b in before + after] == [b.keys for b in reference]
    assert all(torch.equal(a.images, b.images) for a, b in zip(before + after, reference, strict=True))


def _shard_with_corrupt(tmp_path):
    return shard_with_a_corrupt_jpeg(tmp_path / "train-000000.tar", range(9), corrupt=2, label=7)


@pytest.mark.parametrize("method", ["thread", "process"])
def test_corrupt_jpeg_is_skipped_counted_and_batches_stay_full(tmp_path, method):
    # the skip leaves the first mapper task's batch short: its samples, made in a mapper thread or
    # process, fill the batch one by one with the next task's first
    url = _shard_with_corrupt(tmp_path)
    cfg = _cfg([url], batch_size=4, max_lost_fraction=None, options={"method": method})
    loader = make_loader("nodes", cfg)
    batches = list(loader)
    assert [len(b) for b in batches] == [4, 4]  # the skipped sample's place is filled by the next
    assert [(t.expected, t.delivered, t.lost) for t in loader.tallies] == [(9, 8, 1)]  # counted, not raised
    assert sorted(k for b in batches for k in b.keys) == [f"{i:06d}" for i in range(9) if i != 2]
    assert loader.stats.errors == {"corrupt_sample": 1}
    assert "000002" in loader.stats.error_examples[0] and url in loader.stats.error_examples[0]


def test_corrupt_jpeg_fails_under_fail_policy(tmp_path):
    url = _shard_with_corrupt(tmp_path)
    with pytest.raises(SampleError, match=r"train-000000\.tar.*'000002'"):
        list(make_loader("nodes", _cfg([url], on_error="fail")))


def test_objects_layout_on_nodes_with_resume(tmp_path):
    objects = []
    for i in range(12):
        path = tmp_path / f"{i:06d}.jpg"
        path.write_bytes(tiny_jpeg(i))
        objects.append((f"{i:06d}", str(path), label_of(f"{i:06d}")))
    cfg = LoaderConfig(
        objects=objects, batch_size=4, workers=2, shuffle_buffer=8, augment=AugmentSpec(size=32)
    )
    whole = list(make_loader("nodes", cfg))
    assert key_label_pairs(whole) == Counter((k, label) for k, _, label in objects)
    first = make_loader("nodes", cfg)
    it = iter(first)
    head = next(it)
    second = make_loader("nodes", cfg)
    second.load_state_dict(first.state_dict())
    rest = list(second)
    assert [b.keys for b in [head, *rest]] == [b.keys for b in whole]
    assert second.stats.bytes_read == sum(len(tiny_jpeg(i)) for i in range(12)) - sum(
        len(tiny_jpeg(int(k))) for k in head.keys
    )  # skipped objects are not even fetched


@pytest.mark.parametrize(("k", "pending"), [(1, 3), (2, 0)])
def test_resume_with_a_task_left_half_in_the_batcher(tmp_path, k, pending):
    # a mapper task is a batch's worth of samples: the skipped (corrupt) sample leaves the first
    # task's batch short, so the batch fill takes the next task's first sample and holds the rest
    # for the next batch, which the state names and a resume decodes again
    cfg = _cfg([_shard_with_corrupt(tmp_path)], batch_size=4, max_lost_fraction=None)
    reference = list(make_loader("nodes", cfg))
    first = make_loader("nodes", cfg)
    before = []
    for batch in first:
        before.append(batch)
        if len(before) == k:
            break
    state = json.loads(json.dumps(first.state_dict()))
    assert len(state["readers"][0]["pending"]) == pending
    second = make_loader("nodes", cfg)
    second.load_state_dict(state)
    after = list(second)
    assert [b.keys for b in before + after] == [b.keys for b in reference]
    assert all(torch.equal(a.images, b.images) for a, b in zip(before + after, reference, strict=True))
