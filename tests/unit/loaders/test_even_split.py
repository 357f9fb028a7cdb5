"""Even epochs across ranks (loaders.plan.plan_epoch and every backend on it): every rank yields
exactly len(loader) batches whatever the shard sizes, each sample at most once per epoch (exactly
once with remainder="pad"), and an epoch that cannot give every rank a batch is refused."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from loaders import LoaderConfig, ShardLoader, make_loader
from loaders.config import distributed_ranks
from loaders.plan import EvenSplitError, Part, count_samples, plan_epoch
from tests.helpers.shardkit import label_of, make_uneven_shards, small_config

UNEVEN = [3, 17, 8, 1, 12, 5, 0, 9]  # 55 samples, one empty shard, one of a single sample


def _positions(plan, counts, urls):
    """The (shard, sample index) pairs a plan reads, reader by reader."""
    index = {u: i for i, u in enumerate(urls)}
    out = []
    for reader in plan.readers:
        mine = []
        for part in reader.items:
            mine += [(index[part.url], k) for k in range(part.start, part.stop)]
        assert len(mine) == reader.samples
        out.append(mine)
    return out


@pytest.mark.parametrize("remainder", ["drop", "pad"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_every_rank_gets_the_same_batches_and_no_sample_twice(remainder, drop_last):
    rng = random.Random(5)
    for _ in range(60):
        counts = [rng.choice([0, 1, 2, 5, 13, 40]) for _ in range(rng.randint(1, 9))]
        total = sum(counts)
        world, workers, batch = rng.randint(2, 5), rng.randint(1, 4), rng.randint(1, 8)
        urls = [f"s{i}" for i in range(len(counts))]
        kw = dict(world_size=world, num_workers=workers, batch_size=batch, drop_last=drop_last)
        kw.update(remainder=remainder, seed=3, epoch=rng.randint(0, 9))
        if total == 0 or (remainder == "drop" and (total // world) // (batch if drop_last else 1) == 0):
            with pytest.raises(EvenSplitError, match="cannot give each of"):
                plan_epoch(urls, counts, rank=0, **kw)
            continue
        plans = [plan_epoch(urls, counts, rank=r, **kw) for r in range(world)]
        assert len({p.batches for p in plans}) == 1 and len({p.samples for p in plans}) == 1
        read = Counter(pos for p in plans for reader in _positions(p, counts, urls) for pos in reader)
        n = plans[0].samples
        assert sum(read.values()) == world * n
        if drop_last:
            assert n % batch == 0
        if remainder == "drop":
            assert set(read.values()) == {1}  # at most once
            assert total - len(read) == plans[0].dropped < world * (batch if drop_last else 1)
        else:
            assert len(read) == total  # every sample, the padding repeats a few
            assert sum(read.values()) - total == plans[0].padded
        for p in plans:  # a reader's batches are whole except the rank's last one
            assert sum(r.batches for r in p.readers) == p.batches
            assert sum(r.samples for r in p.readers) == n


def test_too_few_shards_are_split_by_sample():
    plans = [plan_epoch(["only"], [10], rank=r, world_size=2, num_workers=2, batch_size=2) for r in (0, 1)]
    # 5 samples a rank, batches of 2, 2 and 1: worker 0 makes the first and the last
    # one shard for four readers: every part is read by byte range (ranged)
    assert [r.items for r in plans[0].readers] == [(Part("only", 0, 3, True),), (Part("only", 3, 5, True),)]
    assert [r.items for r in plans[1].readers] == [(Part("only", 5, 8, True),), (Part("only", 8, 10, True),)]
    assert [p.batches for p in plans] == [3, 3]


def test_what_cannot_be_split_evenly_is_refused_with_the_numbers():
    with pytest.raises(EvenSplitError, match=r"3 sample\(s\) cannot give each of 4 ranks one batch"):
        plan_epoch(["a", "b"], [1, 2], rank=0, world_size=4)
    with pytest.raises(EvenSplitError, match=r"4 x 8 = 32 \(drop_last\)"):
        plan_epoch(["a"], [20], rank=0, world_size=4, batch_size=8, drop_last=True)
    # padding makes one batch per rank out of any sample
    assert plan_epoch(["a"], [1], rank=3, world_size=4, remainder="pad").batches == 1
    with pytest.raises(EvenSplitError, match="shard_samples"):
        plan_epoch(["s3://b/a.tar"], None, rank=0, world_size=2)


def test_local_shards_are_counted_from_their_headers(tmp_path):
    urls = make_uneven_shards(tmp_path, [4, 0, 7])
    assert [count_samples(u) for u in urls] == [4, 0, 7]
    assert count_samples("file://" + urls[2]) == 7
    assert count_samples("s3://bucket/train-000000.tar") is None


def _epoch(loader, epoch):
    loader.set_epoch(epoch)
    return list(loader)


@pytest.mark.parametrize(("backend", "workers"), [("torch", 0), ("torch", 1), ("threads", 2), ("nodes", 1)])
@pytest.mark.parametrize("remainder", ["drop", "pad"])
def test_backends_give_every_rank_len_batches_over_uneven_shards(tmp_path, backend, workers, remainder):
    urls = make_uneven_shards(tmp_path, UNEVEN)
    total = sum(UNEVEN)
    world = 2
    loaders = [
        make_loader(
            backend,
            small_config(urls, workers=workers, rank=r, world_size=world, batch_size=4, remainder=remainder),
        )
        for r in range(world)
    ]
    for epoch in range(2):
        seen: Counter = Counter()
        lengths = []
        for loader in loaders:
            batches = _epoch(loader, epoch)
            assert len(batches) == len(loader) == 7  # 55 // 2 = 27 (drop) or 28 (pad) in batches of 4
            lengths.append(len(batches))
            for b in batches:
                assert b.labels.tolist() == [label_of(k) for k in b.keys]
                seen.update(b.keys)
        assert lengths[0] == lengths[1]
        if remainder == "drop":
            assert set(seen.values()) == {1} and len(seen) == total - total % world
        else:
            assert len(seen) == total and sum(seen.values()) == 28 * world
    for loader in loaders:
        getattr(loader, "close", lambda: None)()


def test_single_rank_reads_whole_shards_and_knows_its_length(tmp_path):
    urls = make_uneven_shards(tmp_path, [5, 9, 2, 6])
    loader = ShardLoader(urls, workers=2, batch_size=4, rank=0, world_size=1, return_batches=True)
    for epoch in range(3):
        loader.set_epoch(epoch)
        expected = len(loader)  # each worker's shards make their own partial batch
        batches = list(loader)
        assert len(batches) == expected and sum(len(b) for b in batches) == 22
    loader.close()


def test_len_without_sample_counts_says_what_it_needs():
    loader = ShardLoader(["s3://bucket/train-000000.tar"], workers=0, rank=0, world_size=1)
    with pytest.raises(TypeError, match="shard_samples"):
        len(loader)
    # with the manifest's counts it is known without a request
    counted = ShardLoader(
        ["s3://bucket/train-000000.tar"],
        workers=0,
        batch_size=4,
        shard_samples={"s3://bucket/train-000000.tar": 10},
        rank=0,
        world_size=1,
    )
    assert len(counted) == 3


def test_rank_and_world_size_from_torch_distributed_then_torchrun_env(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert distributed_ranks() == (0, 1)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    assert distributed_ranks() == (3, 4)
    assert distributed_ranks(rank=1) == (1, 4)  # a number given is used as given
    assert LoaderConfig(urls=["a"]).with_ranks().world_size == 4
    import socket

    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        assert distributed_ranks() == (0, 1)  # the process group wins over the environment
    finally:
        dist.destroy_process_group()
    with pytest.raises(ValueError, match="outside world_size"):
        distributed_ranks(rank=4)


def test_resume_mid_epoch_on_two_ranks_keeps_the_count(tmp_path):
    import json

    urls = make_uneven_shards(tmp_path, UNEVEN)
    for rank in range(2):
        cfg = small_config(urls, workers=1, rank=rank, world_size=2, batch_size=4)
        first = make_loader("torch", cfg)
        first.set_epoch(1)
        before = list(itertools.islice(iter(first), 3))
        state = json.loads(json.dumps(first.state_dict()))
        first.close()
        second = make_loader("torch", cfg)
        second.load_state_dict(state)
        second.set_epoch(1)
        after = list(second)
        assert len(before) + len(after) == len(second) == 7
        keys = [k for b in before + after for k in b.keys]
        assert len(keys) == len(set(keys)) == 27
        second.close()
