"""Nothing lost without a word, against the lab's radosgw: a damaged shard-cache entry (zeros, random
bytes, cut short) is found when first opened, evicted and fetched again, and every epoch delivers
every sample; a shard damaged in the store itself (no good copy anywhere) loses exactly the samples
whose bytes were damaged, and the headline, results.parquet and the report say which; a cache
directory on a file system too small for one shard, read-only, or removed under the reader is read
around: the cell completes, the bytes come from the store, and a note says why.

The mounts need root (CAP_SYS_ADMIN), which CI has: there a failed mount fails the test.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pyarrow.parquet as pq
import pytest

from iobench.datasets.manifest import Manifest
from iobench.tiers.s3 import S3Tier
from loaders import SamplesLostError, ShardLoader
from loaders.observe import CacheHealthCounts, LoaderCounters
from loaders.storage.shardcache import ShardCache
from tests.helpers.faultkit import cache_problems, dataset_pairs, stage_copy
from tests.helpers.shardkit import key_label_pairs
from tests.helpers.sweepkit import env_of, sweep_file
from tests.reliability.test_resource_faults import mounted_tmpfs

DAMAGED = 3  # which shard of the tiny dataset (8 shards of 32 samples, ~3.6 MB each) is damaged
REGION = (1_000_000, 1_600_000)  # the bytes damaged by zeros or random bytes; cut short: at its start


@pytest.fixture(scope="module")
def staged(lab_env, tiny_dataset):
    url = stage_copy(lab_env, tiny_dataset, "lost")
    manifest = Manifest.load(tiny_dataset)
    return url, manifest, S3Tier(url=url).shard_urls(manifest), dataset_pairs(tiny_dataset)


def _damage(path: Path, how: str) -> None:
    with open(path, "r+b") as f:
        if how == "truncated":
            f.truncate(REGION[0])
            return
        f.seek(REGION[0])
        size = REGION[1] - REGION[0]
        f.write(bytes(size) if how == "zeros" else os.urandom(size))


def _loader(url: str, manifest: Manifest, cache: Path | None, **kw) -> ShardLoader:
    tier = S3Tier(url=url)
    urls = tier.shard_urls(manifest)
    settings = {
        "workers": 1,
        "batch_size": 16,
        "shuffle_buffer": 0,
        "return_batches": True,
        "storage_options": tier.storage_options(),
        "cache_dir": str(cache) if cache else None,
        "shard_sizes": {u: s.bytes for u, s in zip(urls, manifest.shards, strict=True)},
        "shard_samples": {u: s.samples for u, s in zip(urls, manifest.shards, strict=True)},
        "shard_sha256": {u: s.sha256 for u, s in zip(urls, manifest.shards, strict=True)},
    }
    return ShardLoader(urls, **{**settings, **kw})


@pytest.mark.parametrize("how", ["zeros", "random", "truncated"])
def test_a_damaged_cache_entry_is_fetched_again_and_every_epoch_delivers_every_sample(
    lab_env, staged, tmp_path, how
):
    url, manifest, urls, want = staged
    cache = tmp_path / "cache"
    with _loader(url, manifest, cache) as filling:
        assert key_label_pairs(filling) == want  # fills the cache
    _damage(Path(ShardCache(cache, 10**9).path_for(urls[DAMAGED])), how)

    # closed before the cache is looked at: its persistent worker reads ahead into a third epoch,
    # holding a shard's lock while it fetches
    with _loader(url, manifest, cache, max_lost_fraction=0.0) as loader:  # not one sample may be lost
        epochs = [key_label_pairs(loader) for _ in range(2)]
    c = loader.stats.counters.cache
    assert epochs == [want, want] and c is not None
    assert c.damaged == 1 and c.bytes_fetched == manifest.shards[DAMAGED].bytes  # one refetch
    assert c.misses == 1 and not loader.stats.errors and loader.stats.counters.lost is None
    assert [t.lost for t in loader.tallies] == [0, 0] and [t.expected for t in loader.tallies] == [256, 256]
    (note,) = loader.stats.notes
    assert urls[DAMAGED] in note and "fetched again" in note
    sha = {u: s.sha256 for u, s in zip(urls, manifest.shards, strict=True)}
    assert cache_problems(cache, sha) == []
    print(f"figures: cache entry damaged ({how}): {c.damaged} found, refetched once; {note}")


def test_a_cache_directory_removed_under_the_reader_is_made_again(lab_env, staged, tmp_path):
    url, manifest, urls, want = staged
    cache = tmp_path / "cache"
    loader = _loader(url, manifest, cache, workers=0, max_lost_fraction=0.0)
    got: Counter = Counter()
    for step, batch in enumerate(loader):
        got.update(zip(batch.keys, batch.labels.tolist(), strict=True))
        if step == 2:
            shutil.rmtree(cache)
    assert got == want
    assert (loader.stats.counters.cache_health or CacheHealthCounts()).recreated == 1
    assert any("was removed: made again" in n for n in loader.stats.notes)
    assert cache_problems(cache, {u: s.sha256 for u, s in zip(urls, manifest.shards, strict=True)}) == []


def _lost_keys(shard: Path, region: tuple[int, int]) -> set[str]:
    """The samples of ``shard`` with any member's bytes (its header to its data's end) in ``region``:
    read straight from the intact local copy with the standard library's tarfile."""
    lost = set()
    with tarfile.open(shard) as tf:
        for m in tf.getmembers():
            if m.offset < region[1] and m.offset_data + m.size > region[0]:
                lost.add(m.name.split(".", 1)[0])
    return lost


def _overwrite(lab, url: str, name: str, data: bytes) -> None:
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    s3 = boto3.client(
        "s3",
        endpoint_url=lab.env["AWS_ENDPOINT_URL"],
        aws_access_key_id=lab.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=lab.env["AWS_SECRET_ACCESS_KEY"],
    )
    s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)


def test_a_shard_damaged_in_the_store_loses_exactly_its_damaged_samples_within_the_budget(
    lab_env, tiny_dataset, tmp_path
):
    """Read through the cache and streamed alike: the samples delivered are the dataset's less those
    whose bytes were damaged, exactly; past the default budget the epoch fails naming the shard."""
    url = stage_copy(lab_env, tiny_dataset, "storeloss")
    name = f"train-{DAMAGED:06d}.tar"
    data = bytearray((tiny_dataset / name).read_bytes())
    data[REGION[0] : REGION[1]] = os.urandom(REGION[1] - REGION[0])
    _overwrite(lab_env, url, name, bytes(data))
    manifest, want = Manifest.load(tiny_dataset), dataset_pairs(tiny_dataset)
    lost = _lost_keys(tiny_dataset / name, REGION)
    kept = Counter({pair: n for pair, n in want.items() if pair[0] not in lost})
    for cache in (tmp_path / "cache", None):
        loader = _loader(url, manifest, cache, max_lost_fraction=0.1)
        assert key_label_pairs(loader) == kept, cache
        (tally,) = loader.tallies
        assert (tally.expected, tally.delivered, tally.lost) == (256, 256 - len(lost), len(lost))
        (region,) = loader.stats.losses
        assert region.url == f"{url}/{name}" and region.begin < REGION[1] and region.end > REGION[0]
        # the samples whose headers were damaged were skipped with the region; one whose image
        # bytes alone were damaged was read, failed to decode and was skipped as corrupt
        lost_in_regions = loader.stats.counters.lost
        assert lost_in_regions is not None
        assert lost_in_regions.samples + sum(loader.stats.errors.values()) == len(lost)
    with pytest.raises(SamplesLostError) as info:
        key_label_pairs(_loader(url, manifest, None))  # the default budget: 0.1 %
    said = str(info.value)
    assert f"{url}/{name} bytes " in said and "max_lost_fraction=0.001" in said and "uploaded again" in said
    print(f"figures: store copy with random bytes at {REGION}: {len(lost)} samples lost, exactly; {said}")


def _sweep(iobench_sweep, lab, tmp_path: Path, dataset: Path, tier: dict) -> tuple[dict, dict, str]:
    config = sweep_file(tmp_path, dataset, tier, samples_per_s=2000, epochs=2)
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", config, "--out", out, env=env_of(lab), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (cell,) = [p for p in out.iterdir() if (p / "summary.json").exists()]
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    report = iobench_sweep.run("report", out, env=env_of(lab), timeout=120)
    return json.loads((cell / "summary.json").read_text()), row, report.stdout


def test_a_shard_damaged_in_the_store_loses_exactly_its_damaged_samples_named_in_the_headline(
    lab_env, tiny_dataset, tmp_path, iobench_sweep
):
    """No good copy anywhere: the shard cache refuses the download (its sha256 is not the upload's)
    and reads it through; the reader skips the damaged region by the shard's index and goes on."""
    url = stage_copy(lab_env, tiny_dataset, "storedamage")
    name = f"train-{DAMAGED:06d}.tar"
    data = bytearray((tiny_dataset / name).read_bytes())
    data[REGION[0] : REGION[1]] = bytes(REGION[1] - REGION[0])
    _overwrite(lab_env, url, name, bytes(data))
    lost = _lost_keys(tiny_dataset / name, REGION)
    tier = {"kind": "s3", "name": f"s3-{uuid.uuid4().hex[:6]}", "url": url, "cache_dir": str(tmp_path / "c")}
    summary, row, report = _sweep(iobench_sweep, lab_env, tmp_path, tiny_dataset, tier)

    assert summary["status"] == "ok"
    headline = summary["verdict"]["headline"]
    said = f"epoch 0 delivered {256 - len(lost)} of 256 samples ({len(lost)} lost"
    assert headline.startswith("SAMPLES LOST: ") and said in headline, headline
    assert f"{url}/{name} bytes " in headline
    assert row["samples_expected"] == 512 and row["samples_lost"] == 2 * len(lost)
    assert summary["losses"]["lost"] == 2 * len(lost)
    assert [e["samples"] for e in summary["epochs"]] == [256 - len(lost)] * 2
    health = LoaderCounters.from_flat(summary["loader_stats_all_steps"]["counters"]).cache_health
    assert health is not None and health.store_checksum_mismatches >= 1  # not cached as good
    assert "SAMPLES LOST" in report and name in report
    print(f"figures: store copy damaged at bytes {REGION}: {len(lost)} samples lost an epoch; {headline}")


@pytest.mark.parametrize("disk", ["too small for one shard", "read-only"])
def test_a_cache_directory_that_cannot_hold_a_shard_is_read_around_and_the_cell_completes(
    lab_env, tiny_dataset, tmp_path, iobench_sweep, disk
):
    url = stage_copy(lab_env, tiny_dataset, "cachedisk")
    manifest = Manifest.load(tiny_dataset)
    with mounted_tmpfs(tmp_path / "disk", "1m", read_only=disk == "read-only") as mount:
        tier = {"kind": "s3", "name": f"s3-{uuid.uuid4().hex[:6]}", "url": url, "cache_dir": str(mount / "c")}
        if disk != "read-only":
            tier["cache_size"] = "1GB"  # the limit above the disk: ENOSPC comes from the kernel
        summary, row, report = _sweep(iobench_sweep, lab_env, tmp_path, tiny_dataset, tier)
    assert summary["status"] == "ok" and row["samples_lost"] == 0
    assert [e["samples"] for e in summary["epochs"]] == [256, 256]
    health = LoaderCounters.from_flat(summary["loader_stats_all_steps"]["counters"]).cache_health
    assert (
        health is not None and health.bypassed_bytes >= manifest.total_bytes
    )  # every epoch's bytes came around it
    notes = " ".join(summary["loader_stats_all_steps"]["notes"])
    why = "read-only (EROFS)" if disk == "read-only" else "full (ENOSPC)"
    assert "cannot be used" in notes and why in notes
    assert "shard cache read around" in report
    print(f"figures: cache on a 1 MiB tmpfs ({disk}): {health.bypassed_bytes:,} bytes read around; {notes}")


def test_the_rados_tiers_ram_cache_is_checked_the_same_way(ceph_lab, tiny_dataset):
    """The RADOS tier's memory_cache is the same shard cache on tmpfs: an entry damaged in RAM is
    found at first open and fetched again from the pool."""
    from iobench.ceph.connection import shutdown_all
    from iobench.ceph.upload import upload_rados
    from iobench.tiers import make_tier
    from iobench.tiers.ramcache import release

    url = f"rados://iobench-data/lost-{uuid.uuid4().hex[:6]}"
    upload_rados(tiny_dataset, url, conffile=str(ceph_lab.conf))
    tier = make_tier({"kind": "rados", "url": url, "conffile": str(ceph_lab.conf), "memory_cache": "64MB"})
    loader = None
    try:
        manifest = tier.load_manifest()
        assert tier.prepare(manifest, "warm").achieved == "warm"
        urls = tier.shard_urls(manifest)
        _damage(Path(ShardCache(tier.cache_dir, 10**9).path_for(urls[DAMAGED])), "random")
        source = tier.source(manifest)
        counts = {u: s.samples for u, s in zip(urls, manifest.shards, strict=True)}
        loader = ShardLoader(
            urls, workers=1, return_batches=True, source=source, shard_samples=counts, max_lost_fraction=0.0
        )
        assert key_label_pairs(loader) == dataset_pairs(tiny_dataset)
        cache = loader.stats.counters.cache
        assert cache is not None and cache.damaged == 1 and cache.misses == 1
    finally:
        if loader is not None:  # its worker reads ahead into the next epoch, filling the cache anew
            loader.close()
        release(tier.cache_dir)
        shutdown_all()
    assert not Path(tier.cache_dir).exists()
