"""The S3 tier and the shard cache against the real radosgw of the lab (integration)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import time
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import boto3
import pytest

from iobench.datasets.manifest import Manifest
from iobench.datasets.upload import UploadError, upload_s3
from iobench.tiers import make_tier
from iobench.tiers.base import TierConfigError
from loaders import ShardLoader
from loaders.observe import CacheStats, LoaderCounters, RequestCounts
from loaders.storage.objectstore import ObjectReader, ObjectStoreError
from loaders.storage.shardcache import ShardCache
from tests.helpers.faultkit import dataset_pairs
from tests.helpers.runs import exact_epochs
from tests.helpers.shardkit import key_label_pairs


@pytest.fixture
def s3_env(ceph_lab, monkeypatch):
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    return ceph_lab


@pytest.fixture
def staged(s3_env, tiny_dataset):
    url = f"s3://iobench-{uuid.uuid4().hex[:8]}/tiny"
    report = upload_s3(tiny_dataset, url, verify="full")
    return url, report


def _client(lab):
    return boto3.client(
        "s3",
        endpoint_url=lab.env["AWS_ENDPOINT_URL"],
        aws_access_key_id=lab.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=lab.env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


def test_stage_then_read_back_gives_equal_checksums(s3_env, staged, tiny_dataset):
    url, report = staged
    manifest = Manifest.load(tiny_dataset)
    assert (
        report.created
        and report.created.startswith("the bucket ")
        and len(report.uploaded) == 2 * len(manifest.shards)
    )
    assert report.objects == len(report.uploaded) + 1  # and the manifest
    # idempotent: a second run uploads nothing
    again = upload_s3(tiny_dataset, url)
    assert again.uploaded == [] and len(again.skipped) == 2 * len(manifest.shards)
    # the store's bytes hash to the manifest's checksums
    reader = ObjectReader(make_tier({"kind": "s3", "url": url}).storage_options())
    for entry in manifest.shards:
        data = reader.read_range(f"{url}/{entry.name}", 0, entry.bytes)
        assert hashlib.sha256(data).hexdigest() == entry.sha256
    # and the tier reads the manifest back from the store
    assert make_tier({"kind": "s3", "url": url}).load_manifest() == manifest


def test_s3_stream_and_cached_reads_yield_the_local_samples(s3_env, staged, tiny_dataset, tmp_path):
    url, _ = staged
    tier = make_tier({"kind": "s3", "url": url, "cache_dir": str(tmp_path / "cache"), "cache_size": "100MB"})
    manifest = tier.load_manifest()
    expected = dataset_pairs(tiny_dataset)  # read straight from the tars, not by a loader
    assert len(expected) == manifest.num_samples
    streamed = ShardLoader(
        tier.shard_urls(manifest), workers=2, return_batches=True, storage_options=tier.storage_options()
    )
    assert key_label_pairs(streamed) == expected
    requests = streamed.stats.counters.requests
    assert requests is not None and requests.requests >= len(manifest.shards)
    assert requests.bytes_transferred == manifest.total_bytes

    source = tier.source(manifest)
    cached = ShardLoader(tier.shard_urls(manifest), workers=2, return_batches=True, source=source)
    assert key_label_pairs(cached) == expected  # epoch 1: every shard a miss
    assert key_label_pairs(cached) == expected  # epoch 2: every shard a hit
    c = cached.stats.counters.cache
    assert c is not None and c.misses == len(manifest.shards) and c.hits == len(manifest.shards)
    cache = ShardCache(source.cache.dir, source.cache.bytes)
    for u, entry in zip(tier.shard_urls(manifest), manifest.shards, strict=True):
        assert hashlib.sha256(Path(cache.path_for(u)).read_bytes()).hexdigest() == entry.sha256


def _through_cache(url: str, cache_dir: str, cache_size: int | str, **loader) -> tuple[Manifest, ShardLoader]:
    """The S3 tier at ``url`` with a shard cache of ``cache_size`` in ``cache_dir``, and a loader
    (``loader``: its settings) that reads it through that cache."""
    tier = make_tier({"kind": "s3", "url": url, "cache_dir": cache_dir, "cache_size": cache_size})
    manifest = tier.load_manifest()
    return manifest, ShardLoader(
        tier.shard_urls(manifest), return_batches=True, source=tier.source(manifest), **loader
    )


@pytest.mark.parametrize("cached", [False, True])
def test_two_shards_over_2_ranks_x_4_workers_are_read_by_range_once(
    s3_env, staged, tiny_dataset, tmp_path, cached
):
    # 8 readers for 2 shards: every part is a ranged GET of its members (their offsets from the
    # shard's .idx, uploaded beside it); with a cache, a part is read from the cached whole shard
    url, _ = staged
    config = {"kind": "s3", "url": url} | (
        {"cache_dir": str(tmp_path / "c"), "cache_size": "100MB"} if cached else {}
    )
    tier = make_tier(config)
    manifest = tier.load_manifest()
    urls, shards = tier.shard_urls(manifest)[:2], manifest.shards[:2]
    source = replace(
        tier.source(manifest), shard_samples={u: e.samples for u, e in zip(urls, shards, strict=True)}
    )
    local = [str(Path(tiny_dataset) / e.name) for e in shards]
    expected = key_label_pairs(ShardLoader(local, workers=0, return_batches=True))
    got, transferred = Counter(), 0
    for rank in range(2):
        loader = ShardLoader(
            urls, workers=4, rank=rank, world_size=2, batch_size=4, return_batches=True, source=source
        )
        assert all(p.ranged for r in loader.plan(0).readers for p in r.items)
        got += key_label_pairs(loader)
        transferred += (loader.stats.counters.requests or RequestCounts()).bytes_transferred
    assert got == expected  # 64 samples: 32 a rank, every one once
    shard_bytes = sum(e.bytes for e in shards)
    if cached:  # each whole shard downloaded once, on its first miss
        assert transferred >= shard_bytes
    else:  # the members' bytes and the parts' indexes: no shard read from its start by every reader
        assert transferred < 1.05 * shard_bytes


@pytest.mark.parametrize("policy", ["auto", "lru"])
def test_a_cache_smaller_than_the_dataset_stays_within_its_limit(s3_env, staged, tmp_path, policy):
    url, _ = staged
    limit = 12_000_000  # about 3.5 of the 10 shards
    # the loader's cache_policy is used over the tier's
    manifest, loader = _through_cache(url, str(tmp_path / "small"), limit, workers=2, cache_policy=policy)
    hits = []
    for _ in range(2):
        before = (loader.stats.counters.cache or CacheStats()).hits
        assert key_label_pairs(loader).total() == manifest.num_samples
        hits.append((loader.stats.counters.cache or CacheStats()).hits - before)
    cache = ShardCache(tmp_path / "small", limit)
    assert 0 < cache.used_bytes() <= limit
    c = loader.stats.counters.cache
    assert c is not None
    if policy == "lru":
        # LRU under full shuffled epochs thrashes: far fewer hits than the cache could hold
        assert c.evictions > 0 and c.hits < len(manifest.shards)
    else:
        # auto: the shards add up to more than the cache, so it is static: the first epoch keeps
        # the 3 shards that fit and reads the rest through; the second hits exactly those 3
        assert c.evictions == 0 and hits == [0, 3]
        assert c.bypassed == 2 * len(manifest.shards) - 3 - 3


def _read_all(url, cache_dir, env, out):
    os.environ.update(env)
    _, loader = _through_cache(url, cache_dir, "100MB", workers=1)
    keys = [k for batch in loader for k in batch.keys]
    Path(out).write_text(json.dumps({"keys": keys, "counters": loader.stats.counters.as_flat()}))


def test_two_processes_sharing_a_cache_download_each_shard_once(s3_env, staged, tmp_path):
    url, _ = staged
    cache_dir = str(tmp_path / "shared")
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_read_all, args=(url, cache_dir, s3_env.env, tmp_path / f"out{i}.json"))
        for i in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    results = [json.loads((tmp_path / f"out{i}.json").read_text()) for i in range(2)]
    n_shards = len(make_tier({"kind": "s3", "url": url}).load_manifest().shards)
    assert sorted(results[0]["keys"]) == sorted(results[1]["keys"])
    counters = [LoaderCounters.from_flat(r["counters"]) for r in results]
    misses = sum((c.cache or CacheStats()).misses for c in counters)
    hits = sum((c.cache or CacheStats()).hits for c in counters)
    assert misses == n_shards and hits == n_shards
    # GETs went out only for the misses
    assert sum((c.requests or RequestCounts()).bytes_transferred for c in counters) == sum(
        e.bytes for e in make_tier({"kind": "s3", "url": url}).load_manifest().shards
    )


def test_wrong_credentials_fail_clearly_without_leaking_the_secret(s3_env, staged, tiny_dataset, monkeypatch):
    url, _ = staged
    secret = "wrong-secret-" + uuid.uuid4().hex
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    with pytest.raises(OSError) as info:
        make_tier({"kind": "s3", "url": url}).load_manifest()
    assert "credentials" in str(info.value) and secret not in str(info.value)
    with pytest.raises(UploadError) as info:
        upload_s3(tiny_dataset, url)
    assert "credentials were refused" in str(info.value) and secret not in str(info.value)


def test_missing_bucket_and_deleted_object_are_clear_errors(s3_env, staged):
    url, _ = staged
    with pytest.raises(OSError, match="iobench-no-such-bucket"):
        make_tier({"kind": "s3", "url": "s3://iobench-no-such-bucket/x"}).load_manifest()
    tier = make_tier({"kind": "s3", "url": url})
    manifest = tier.load_manifest()
    victim = tier.shard_urls(manifest)[3]
    bucket, key = victim[5:].split("/", 1)
    _client(s3_env).delete_object(Bucket=bucket, Key=key)
    loader = ShardLoader(tier.shard_urls(manifest), workers=0, storage_options=tier.storage_options())
    with pytest.raises(ObjectStoreError) as info:
        list(loader)
    assert victim in str(info.value)


def test_endpoint_down_fails_fast_and_clearly(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    tier = make_tier({"kind": "s3", "url": "s3://bucket/p", "endpoint_url": "http://127.0.0.1:9"})
    t0 = time.perf_counter()
    with pytest.raises(OSError) as info:
        tier.load_manifest()
    assert time.perf_counter() - t0 < 30
    assert "127.0.0.1:9" in str(info.value) and "gave up after" in str(info.value)


def test_sweep_over_tiers_shows_epochs_hit_ratios_and_leaks_no_secret(
    s3_env, iobench_sweep, tiny_dataset, tmp_path
):
    import pyarrow.parquet as pq
    import yaml

    url = f"s3://iobench-{uuid.uuid4().hex[:8]}/sweep"
    cfg = {
        "dataset": {"path": str(tiny_dataset)},
        "tiers": [
            {"kind": "local", "name": "local"},
            {"kind": "s3", "name": "s3-direct", "url": url, "upload": True},
            {
                "kind": "s3",
                "name": "s3-cache",
                "url": url,
                "cache_dir": str(tmp_path / "c1"),
                "cache_size": "100MB",
            },
            {
                "kind": "s3",
                "name": "s3-small",
                "url": url,
                "cache_dir": str(tmp_path / "c2"),
                "cache_size": "12MB",
            },
            {"kind": "s3", "name": "s3-ram", "url": url, "memory_cache": "100MB"},
        ],
        "loaders": [{"kind": "torch", "workers": [1], "batch_size": [32], "shuffle_buffer": 32}],
        "accelerators": [{"kind": "emulated", "type": "h100"}],
        "run": {"warmup_steps": 1, "epochs": 2, "min_measure": exact_epochs()},
    }
    path = tmp_path / "tiers.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", path, "--out", out)
    import shutil

    from iobench.tiers import make_tier as _make

    shutil.rmtree(_make(cfg["tiers"][4]).cache_dir, ignore_errors=True)  # tmpfs is RAM: give it back
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["tier"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert set(rows) == {"local", "s3-direct", "s3-cache", "s3-small", "s3-ram"}
    assert all(r["status"] == "ok" and r["epochs"] == 2 for r in rows.values())
    # a cache that holds the dataset: every shard misses in epoch 1 and hits in epoch 2
    for tier in ("s3-cache", "s3-ram"):
        assert rows[tier]["first_epoch_cache_hit_ratio"] == 0.0
        assert rows[tier]["last_epoch_cache_hit_ratio"] == 1.0
    # a cache a third of the dataset: static (it cannot hold the data), so it keeps what the first
    # epoch put in it, never evicts, and serves that share of the second (LRU would thrash: 6 %)
    shards = Manifest.load(tiny_dataset).shards
    held = 12_000_000 / sum(e.bytes for e in shards)  # the cache's share of the data
    assert rows["s3-small"]["cache_evictions"] == 0
    # whole shards: it keeps all it can fit, at most one shard's worth short of its share
    assert held - 1 / len(shards) <= rows["s3-small"]["last_epoch_cache_hit_ratio"] <= held
    assert (
        rows["s3-direct"]["requests"] >= 2 * len(Manifest.load(tiny_dataset).shards)
        and rows["s3-direct"]["first_epoch_cache_hit_ratio"] is None
    )
    detail = iobench_sweep.run("report", out, "--detail").stdout  # epoch by epoch: a detail
    assert "cache hits" in detail and "GETs" in detail
    # the credentials reached the loaders through the environment only
    secret = s3_env.env["AWS_SECRET_ACCESS_KEY"]
    for f in out.rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f
    assert secret not in proc.stdout + proc.stderr + detail


def test_reads_spread_over_several_gateways_and_step_around_a_dead_one(s3_env, staged, tmp_path):
    """endpoint_url as a list: the gateways of one store (here the lab's radosgw by two names, and a
    port where nothing listens). Each shard is read from the gateway its URL picks, a retry from
    the next one, so every read succeeds and both live names carry reads."""
    url, _ = staged
    endpoint = s3_env.env["AWS_ENDPOINT_URL"]
    port = endpoint.rsplit(":", 1)[1]
    names = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    tier = make_tier({"kind": "s3", "url": url, "endpoint_url": names})
    manifest = tier.load_manifest()
    loader = ShardLoader(
        tier.shard_urls(manifest), workers=0, return_batches=True, source=tier.source(manifest)
    )
    assert key_label_pairs(loader).total() == manifest.num_samples
    requests = loader.stats.counters.requests
    assert requests is not None and requests.retries == 0
    assert requests.by_endpoint[0] > 0 and requests.by_endpoint[1] > 0
    assert tier.describe()["endpoints"] == names
    dead = make_tier({"kind": "s3", "url": url, "endpoint_url": [names[0], "http://127.0.0.1:9"]})
    loader = ShardLoader(
        dead.shard_urls(manifest), workers=0, return_batches=True, source=dead.source(manifest)
    )
    assert key_label_pairs(loader).total() == manifest.num_samples  # the shards the dead one picks: retried
    assert (loader.stats.counters.requests or RequestCounts()).retries > 0
    with pytest.raises(TierConfigError, match="a list holds two or more"):
        make_tier({"kind": "s3", "url": url, "endpoint_url": [names[0]]})


def test_a_client_list_is_one_tier_per_client_and_a_wrong_client_is_refused(monkeypatch):
    from iobench.tiers.s3 import S3Tier

    spec = {"kind": "s3", "name": "rgw", "url": "s3://bucket/p", "client": ["s3fs", "obstore"]}
    assert [(t["name"], t["client"]) for t in S3Tier.one_per_client(spec)] == [
        ("rgw-s3fs", "s3fs"),
        ("rgw-obstore", "obstore"),
    ]
    assert S3Tier.one_per_client({**spec, "client": "minio"}) == [{**spec, "client": "minio"}]
    with pytest.raises(TierConfigError, match="a list names each client once"):
        S3Tier.one_per_client({**spec, "client": ["minio", "minio"]})
    with pytest.raises(TierConfigError, match=r"client.*allowed values are auto, s3fs, minio"):
        make_tier({"kind": "s3", "url": "s3://bucket/p", "client": "boto"})
    with pytest.raises(TierConfigError, match="s3dlio reads its credentials from the environment only"):
        make_tier({"kind": "s3", "url": "s3://bucket/p", "client": "s3dlio", "profile": "lab"})
    monkeypatch.setattr("loaders.storage.clients.installed_clients", lambda: ["s3fs"])
    with pytest.raises(TierConfigError, match=r"pip install 'iobench\[s3clients\]'"):
        make_tier({"kind": "s3", "url": "s3://bucket/p", "client": "obstore"})
    assert make_tier({"kind": "s3", "url": "s3://bucket/p"}).describe()["client"] == "s3fs"  # auto
