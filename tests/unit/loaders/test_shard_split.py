"""Fewer shards than readers (workers x ranks): shards split by sample, each part read by byte range
(a tar's members from its index, a Parquet file's row groups); every sample once per epoch."""

from __future__ import annotations

import argparse
import os
import tarfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from iobench.datasets.cli import index_command
from iobench.datasets.shardsize import MAX_SHARD_BYTES, auto_shard_bytes
from iobench.datasets.wdsindex import write_wds_index
from loaders import LoaderConfig, make_loader
from loaders.backends.torch_loader import ShardLoader
from loaders.config import plan_for
from loaders.formats.parquet import iter_parquet_samples
from loaders.formats.tar_index import ShardIndexError
from loaders.plan import Part
from tests.helpers.shardkit import make_uneven_shards, small_config, tiny_jpeg, write_shard

SIZES = [13, 19]  # 32 samples in 2 shards of different sizes
KEYS = [f"{i:06d}" for i in range(sum(SIZES))]


@pytest.fixture
def indexed(tmp_path):
    urls = make_uneven_shards(tmp_path, SIZES)
    for url in urls:
        write_wds_index(url)
    return urls


def _config(urls, **settings) -> LoaderConfig:
    return small_config(urls, **{"batch_size": 2, **settings})


def test_the_plan_splits_two_shards_over_8_workers_x_2_ranks_every_sample_once(indexed):
    covered: Counter = Counter()
    for rank in range(2):
        cfg = _config(indexed, workers=8, rank=rank, world_size=2)
        counts = cfg.split_counts(8)
        assert counts == SIZES
        plan = plan_for(cfg, cfg.items(), counts, epoch=3, readers=8)
        assert plan.split == "samples" and plan.samples == 16 and plan.batches == 8
        assert all(len(r.items) > 0 for r in plan.readers)  # no idle reader
        for reader in plan.readers:
            assert all(isinstance(p, Part) and p.ranged for p in reader.items)
            assert sum(p.stop - p.start for p in reader.items) == reader.samples
            covered.update((p.url, i) for p in reader.items for i in range(p.start, p.stop))
    assert sorted(covered) == [(u, i) for u, n in zip(indexed, SIZES, strict=True) for i in range(n)]
    assert set(covered.values()) == {1}


def test_one_rank_splits_too_few_shards_instead_of_refusing(indexed):
    cfg = _config(indexed, workers=3, rank=0, world_size=1)
    plan = plan_for(cfg, cfg.items(), cfg.split_counts(3), epoch=0, readers=3)
    assert plan.split == "samples" and plan.samples == 32 and plan.batches == 16
    assert all(isinstance(p, Part) and p.ranged for r in plan.readers for p in r.items)
    # as many shards as readers: whole shards, sequential reads, as before
    whole = plan_for(cfg, cfg.items(), None, epoch=0, readers=2)
    assert whole.split == "shards" and sorted(u for r in whole.readers for u in r.items) == sorted(indexed)
    # several ranks with at least a shard per reader: parts cut at range edges only, not ranged
    many = plan_for(_config(indexed, rank=0, world_size=2), indexed, SIZES, epoch=0, readers=1)
    assert not any(p.ranged for r in many.readers for p in r.items)


def _tar_data_end(url: str) -> int:
    """Where the last member's padded data ends: the bytes every sample of the shard spans."""
    with tarfile.open(url) as tf:
        last = tf.getmembers()[-1]
    end = last.offset_data + last.size
    return end + (-end % 512)


def test_torch_loader_8_workers_x_2_ranks_on_2_shards_reads_every_sample_once(indexed):
    loaders = [
        ShardLoader(_config(indexed, workers=8, rank=rank, world_size=2), return_batches=True)
        for rank in range(2)
    ]
    for epoch in range(2):
        seen: Counter = Counter()
        read = 0
        for loader in loaders:
            loader.set_epoch(epoch)
            before = loader.stats.bytes_read
            batches = list(loader)
            assert len(batches) == len(loader) == 8  # exact len(): 16 samples a rank, batches of 2
            seen.update(k for b in batches for k in b.keys)
            read += loader.stats.bytes_read - before
        assert sorted(seen) == KEYS and set(seen.values()) == {1}
        # each member's bytes came off the storage once: ranged reads, no shard read from its start
        assert read == sum(_tar_data_end(u) for u in indexed)
    for loader in loaders:
        loader.close()


@pytest.mark.parametrize("backend", ["torch", "threads"])
def test_one_rank_with_more_workers_than_shards_reads_every_sample_once_per_epoch(indexed, backend):
    loader = make_loader(backend, _config(indexed, workers=3))
    for epoch in range(2):
        loader.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == len(loader) == 16
        assert sorted(k for b in batches for k in b.keys) == KEYS


@pytest.mark.parametrize("ranks", [2, 3])
def test_the_nodes_loader_splits_one_shard_over_its_ranks(indexed, ranks):
    # nodes has one reader per rank (its graph's source; its workers map): one shard, 2-3 readers
    seen: Counter = Counter()
    for rank in range(ranks):
        loader = make_loader("nodes", _config(indexed[1:], workers=2, rank=rank, world_size=ranks))
        assert all(p.ranged for r in loader.plan(0).readers for p in r.items)
        batches = list(loader)
        assert len(batches) == len(loader)
        seen.update(k for b in batches for k in b.keys)
    # 19 samples: 19 // ranks a rank, the rest read by none this epoch (remainder "drop"), none twice
    assert len(seen) == 19 - 19 % ranks and set(seen) <= set(KEYS[SIZES[0] :]) and set(seen.values()) == {1}


def test_dalis_feed_reads_ranged_parts_of_one_shard_over_two_ranks(indexed):
    pytest.importorskip("nvidia.dali")
    from loaders.backends.dali import DaliLoader

    seen: Counter = Counter()
    for rank in range(2):
        cfg = _config(indexed[1:], rank=rank, world_size=2, options={"mode": "external"})
        loader = DaliLoader(cfg)
        assert all(p.ranged for r in loader.plan(0).readers for p in r.items)
        batches = list(loader)
        assert len(batches) == len(loader)
        seen.update(k for b in batches for k in b.keys)
    # 19 samples, 9 a rank: one is read by neither this epoch (remainder "drop"), none twice
    assert len(seen) == 18 and set(seen) < set(KEYS[SIZES[0] :]) and set(seen.values()) == {1}


def test_a_split_epoch_resumes_without_loss_or_repeat(indexed):
    cfg = _config(indexed, workers=3)
    first = ShardLoader(cfg, return_batches=True)
    first.set_epoch(1)
    before = []
    for batch in first:
        before.append(batch)
        if len(before) == 5:
            break
    state = first.state_dict()
    first.close()
    second = ShardLoader(cfg, return_batches=True)
    second.load_state_dict(state)
    after = list(second)
    assert sorted(k for b in before + after for k in b.keys) == KEYS


def test_a_parquet_shard_is_split_by_row_group(tmp_path):
    path = tmp_path / "train-000000.parquet"
    keys = [f"{i:06d}" for i in range(60)]
    table = pa.table(
        {"key": keys, "jpg": [tiny_jpeg(i) for i in range(60)], "cls": [i % 1000 for i in range(60)]}
    )
    pq.write_table(table, path, row_group_size=10)
    # rows 12-17 lie in the second of six row groups: only it (and the footer) is read
    with open(path, "rb") as f:
        part = list(iter_parquet_samples(f, str(path), rows=(12, 18)))
    with open(path, "rb") as f:
        whole = list(iter_parquet_samples(f, str(path)))
    assert [s.key for s in part] == keys[12:18] and [s.offset for s in part] == list(range(12, 18))
    assert sum(s.read_bytes for s in part) < sum(s.read_bytes for s in whole) / 2
    # one shard over 4 workers: every row once, exact len()
    loader = ShardLoader(_config([str(path)], workers=4), return_batches=True)
    plan = loader.plan(0)
    assert all(p.ranged for r in plan.readers for p in r.items)
    batches = list(loader)
    assert len(batches) == len(loader) == 30
    assert sorted(k for b in batches for k in b.keys) == keys


def test_a_missing_index_names_the_shard_and_the_command_that_rebuilds_it(indexed):
    os.unlink(indexed[1][: -len(".tar")] + ".idx")
    with pytest.raises(ShardIndexError) as err:
        list(ShardLoader(_config(indexed, workers=3), return_batches=True))
    message = str(err.value)
    folder = os.path.dirname(indexed[1])
    assert f"{indexed[1]}: its index {indexed[1][:-4]}.idx is missing" in message
    assert f"`iobench dataset index {folder}`" in message
    # the command named rebuilds it, and the split reads again
    index_command(argparse.Namespace(paths=[folder]), Console(file=open(os.devnull, "w")))  # noqa: SIM115
    assert len(list(ShardLoader(_config(indexed, workers=3), return_batches=True))) == 16


def test_a_stale_index_is_an_error_naming_the_shard(tmp_path):
    urls = make_uneven_shards(tmp_path, [6, 10])
    for url in urls:
        write_wds_index(url)
    make_uneven_shards(tmp_path, [6, 12])  # the second shard rewritten: its index now stale
    with pytest.raises(ShardIndexError) as err:
        list(ShardLoader(_config(urls, workers=3), return_batches=True))
    message = str(err.value)
    assert f"{urls[1]}: its index " in message and "stale" in message
    assert f"`iobench dataset index {tmp_path}`" in message
    # the same samples with other bytes (sizes): a member is not where the index says
    write_wds_index(urls[1])
    members = [
        (f"{k:06d}.{ext}", tiny_jpeg(k, 40, 40) if ext == "jpg" else b"1")
        for k in range(6)
        for ext in ("jpg", "cls")
    ]
    write_shard(Path(urls[0]), members)
    with pytest.raises(
        ShardIndexError, match=r"train-000000.tar: its index .* \(stale\): sample \d+ \(key '\d+'\) is at"
    ):
        list(ShardLoader(_config(urls, workers=3), return_batches=True))


def test_the_default_shard_size_gives_4_shards_per_core():
    assert auto_shard_bytes(675 * 2**20, cores=16) == 675 * 2**20 // 64  # 6,144 JPEGs: 64 shards
    assert auto_shard_bytes(10 * 2**40, cores=16) == MAX_SHARD_BYTES  # big data: 128 MiB shards
    assert auto_shard_bytes(100, cores=64) == 1


def test_a_stream_in_a_dataloader_of_its_own_splits_too_few_shards(indexed):
    from torch.utils.data import DataLoader

    from loaders.backends.torch_loader import ShardStream

    batches = list(DataLoader(ShardStream(_config(indexed)), batch_size=None, num_workers=3))
    assert sorted(k for b in batches for k in b.keys) == KEYS
