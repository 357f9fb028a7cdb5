from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from loaders import SampleError, ShardFormatError, ShardLoader, StallMeter, expand_urls
from loaders.formats.tar import iter_samples
from loaders.plan import plan_epoch
from tests.helpers.shardkit import label_of, make_shards, shard_with_a_corrupt_jpeg, tiny_jpeg, write_shard


def test_expand_urls_ranges_lists_and_padding():
    assert expand_urls("s3://b/train-{000000..000002}.tar") == [
        "s3://b/train-000000.tar",
        "s3://b/train-000001.tar",
        "s3://b/train-000002.tar",
    ]
    assert expand_urls("a-{8..10}.tar") == ["a-8.tar", "a-9.tar", "a-10.tar"]
    assert expand_urls("{x,y}-{0..1}") == ["x-0", "x-1", "y-0", "y-1"]
    assert expand_urls(["a", "b-{1..2}"]) == ["a", "b-1", "b-2"]
    with pytest.raises(ValueError, match="runs backwards"):
        expand_urls("t-{5..1}.tar")


def test_one_ranks_whole_shard_split_covers_every_shard_once_across_workers():
    urls = [f"s{i}" for i in range(23)]
    plan = plan_epoch(urls, None, num_workers=4, seed=7, epoch=2)
    taken = [u for reader in plan.readers for u in reader.items]
    assert sorted(taken) == sorted(urls)
    # a new epoch reorders the shards
    e0 = plan_epoch(urls, None, epoch=0).readers[0].items
    e1 = plan_epoch(urls, None, epoch=1).readers[0].items
    assert e0 != e1 and sorted(e0) == sorted(e1)


def _collect(loader):
    keys, labels = [], []
    for batch in loader:
        assert batch.images.dtype == torch.uint8
        assert batch.images.shape[1:] == (3, 32, 32)
        # stamped by its reader (the scale model's production times), on this process's clock
        assert batch.made is not None and batch.made[0] <= batch.made[1] <= time.perf_counter()
        keys += batch.keys
        labels += batch.labels.tolist()
    return keys, labels


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_delivers_every_sample_once_with_matching_labels(tmp_path, workers):
    urls = make_shards(tmp_path, n_shards=4, per_shard=10)
    loader = ShardLoader(
        urls, batch_size=8, workers=workers, shuffle_buffer=16, return_batches=True, augment=_small()
    )
    keys, labels = _collect(loader)
    assert sorted(keys) == [f"{i:06d}" for i in range(40)]
    assert all(label == label_of(k) for k, label in zip(keys, labels, strict=True))
    assert loader.stats.samples == 40
    # every byte up to and including the end-of-archive block; the record padding after it is not read
    assert loader.stats.bytes_read == sum(_bytes_through_end_marker(u) for u in urls)
    assert loader.stats.wall_s["decode"] > 0 and loader.stats.wall_s["fetch"] > 0


def test_ranks_read_disjoint_samples_covering_the_dataset(tmp_path):
    urls = make_shards(tmp_path, n_shards=6, per_shard=5)
    seen = Counter()
    for rank in range(2):
        loader = ShardLoader(
            urls, batch_size=4, workers=1, rank=rank, world_size=2, return_batches=True, augment=_small()
        )
        keys, _ = _collect(loader)
        seen.update(keys)
    assert set(seen) == {f"{i:06d}" for i in range(30)}
    assert set(seen.values()) == {1}


def test_too_few_shards_for_one_ranks_readers_are_split_by_sample(tmp_path):
    # no worker left without samples (tests/unit/loaders/test_shard_split.py reads them)
    urls = make_shards(tmp_path, n_shards=2, per_shard=2)
    loader = ShardLoader(urls, workers=3, rank=0, world_size=1, batch_size=1)
    assert loader.plan(0).split == "samples" and len(loader) == 4
    assert [r.samples for r in loader.plan(0).readers] == [2, 1, 1]
    # several ranks split by sample: two shards feed 2 ranks x 2 workers
    assert len(ShardLoader(urls, workers=2, rank=1, world_size=2, batch_size=1)) == 2


def test_plain_iteration_gives_images_and_labels(tmp_path):
    urls = make_shards(tmp_path, n_shards=1, per_shard=6)
    loader = ShardLoader(urls, batch_size=4, workers=0, augment=_small())
    sizes = [len(labels) for images, labels in loader]
    assert sizes == [4, 2]


def _bytes_through_end_marker(url: str) -> int:
    import tarfile

    with tarfile.open(url) as tf:
        last = tf.getmembers()[-1]
    return last.offset_data + (last.size + 511) // 512 * 512 + 512


def _small():
    from loaders import AugmentSpec

    return AugmentSpec(size=32)


def test_corrupt_jpeg_is_skipped_and_counted(tmp_path):
    url = shard_with_a_corrupt_jpeg(tmp_path / "train-000000.tar", range(5), corrupt=2, label=7)
    loader = ShardLoader(
        [url], batch_size=10, workers=0, return_batches=True, augment=_small(), max_lost_fraction=None
    )
    keys, _ = _collect(loader)
    assert sorted(keys) == ["000000", "000001", "000003", "000004"]
    assert loader.stats.errors == {"corrupt_sample": 1}
    assert "000002" in loader.stats.error_examples[0] and url in loader.stats.error_examples[0]


def test_corrupt_jpeg_fails_under_fail_policy_naming_shard_and_key(tmp_path):
    members = [("000000.jpg", b"garbage"), ("000000.cls", b"1")]
    url = str(write_shard(tmp_path / "bad.tar", members))
    loader = ShardLoader([url], workers=0, on_error="fail", augment=_small())
    with pytest.raises(SampleError, match=r"bad\.tar.*'000000'"):
        list(loader)


def test_missing_label_is_reported(tmp_path):
    members = [("000000.jpg", tiny_jpeg(0)), ("000001.jpg", tiny_jpeg(1)), ("000001.cls", b"3")]
    url = str(write_shard(tmp_path / "nolabel.tar", members))
    loader = ShardLoader([url], workers=0, return_batches=True, augment=_small(), max_lost_fraction=None)
    keys, labels = _collect(loader)
    assert keys == ["000001"] and labels == [3]
    assert loader.stats.errors == {"missing_label": 1}
    assert "no label" in loader.stats.error_examples[0]


def test_truncated_shard_names_shard_and_offset(tmp_path):
    import tarfile

    urls = make_shards(tmp_path, n_shards=1, per_shard=4)
    data = Path(urls[0]).read_bytes()
    with tarfile.open(urls[0]) as tf:
        members = tf.getmembers()
    second_jpg = members[2]
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: second_jpg.offset_data + 100])  # inside the second sample's JPEG
    with open(cut, "rb") as f, pytest.raises(ShardFormatError) as info:
        list(iter_samples(f, str(cut)))
    assert str(cut) in str(info.value) and "truncated" in str(info.value)
    assert info.value.offset == second_jpg.offset_data
    assert f"declares {second_jpg.size} bytes but only 100 follow" in str(info.value)
    # a shard cut exactly at a member boundary is caught by the missing end-of-archive marker
    boundary = tmp_path / "boundary.tar"
    boundary.write_bytes(data[: second_jpg.offset])
    with open(boundary, "rb") as f, pytest.raises(ShardFormatError, match="end-of-archive") as info:
        list(iter_samples(f, str(boundary)))
    assert info.value.offset == second_jpg.offset


def test_hostile_member_names_are_keys_never_paths(tmp_path, monkeypatch):
    members = [
        ("../../evil.jpg", tiny_jpeg(0)),
        ("../../evil.cls", b"5"),
        ("/abs/x.jpg", tiny_jpeg(1)),
        ("/abs/x.cls", b"6"),
    ]
    url = str(write_shard(tmp_path / "hostile.tar", members))
    monkeypatch.chdir(tmp_path)
    before = set(p.name for p in tmp_path.parent.iterdir())
    with open(url, "rb") as f:
        keys = [s.key for s in iter_samples(f, url)]
    assert keys == ["../../evil", "/abs/x"]
    assert set(p.name for p in tmp_path.parent.iterdir()) == before


def test_absurd_member_size_is_refused(tmp_path):
    url = str(write_shard(tmp_path / "big.tar", [("000000.jpg", b"x" * 4096), ("000000.cls", b"1")]))
    with open(url, "rb") as f, pytest.raises(ShardFormatError, match="over the 1024-byte limit"):
        list(iter_samples(f, url, max_member_bytes=1024))


def test_bad_header_checksum_is_refused(tmp_path):
    url = write_shard(tmp_path / "x.tar", [("000000.jpg", b"abc")])
    data = bytearray(url.read_bytes())
    data[10] ^= 0x55
    url.write_bytes(bytes(data))
    with open(url, "rb") as f, pytest.raises(ShardFormatError, match="checksum"):
        list(iter_samples(f, str(url)))


def test_stall_meter_measures_injected_waits():
    def slow():
        for _ in range(5):
            time.sleep(0.02)
            yield 1

    meter = StallMeter(slow())
    for _ in meter:
        time.sleep(0.01)
    s = meter.summary()
    assert s.batches == 5
    assert 0.09 <= s.wait_s <= 0.2
    assert s.stall_fraction == pytest.approx(s.wait_s / s.wall_s)
    assert 0.55 <= s.stall_fraction <= 0.8
    assert s.time_to_first_batch_s >= 0.02
