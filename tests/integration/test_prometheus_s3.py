"""The loaders' Prometheus exporter over the lab's S3 with a shard cache: requests, hits, misses
and bytes per tier, scraped over HTTP (moved from tests/unit/loaders/test_prometheus.py, whose
loaders read local files)."""

from __future__ import annotations

import uuid
from pathlib import Path

from loaders import make_loader
from loaders.observe.prometheus import exported
from tests.helpers.promkit import Scrape, assert_never_decrease, documented
from tests.helpers.shardkit import make_shards, small_config

LOADER_METRICS = documented("iobench_loader_")


def test_over_s3_with_a_shard_cache_requests_hits_misses_and_bytes_per_tier(ceph_lab, tmp_path, monkeypatch):
    import boto3

    from iobench.tiers.s3 import s3_storage_options

    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    bucket = f"iobench-prom-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=ceph_lab.env["AWS_ENDPOINT_URL"], region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    local = make_shards(tmp_path / "shards", n_shards=4, per_shard=10)
    for path in local:
        s3.upload_file(path, bucket, Path(path).name)
    sizes = sum(Path(p).stat().st_size for p in local)
    cfg = small_config(
        f"s3://{bucket}/train-{{000000..000003}}.tar",
        workers=2,
        storage_options=s3_storage_options(ceph_lab.env["AWS_ENDPOINT_URL"], None, True),
        cache_dir=str(tmp_path / "cache"),
        cache_bytes=10 * sizes,
    )
    loader = exported(make_loader("torch", cfg), port=0, gpu=False)
    try:
        for i, _ in enumerate(loader):
            if i == 0:
                first = Scrape.of(loader.exporter.port)
        epoch1 = Scrape.of(loader.exporter.port)
        for _ in loader:
            pass
        epoch2 = Scrape.of(loader.exporter.port)
    finally:
        loader.exporter.close()

    assert first.value("iobench_loader_cache_misses_total") >= 1
    assert first.value("iobench_loader_cache_hits_total") == 0
    # epoch 1 downloads each of the 4 shards once; epoch 2 finds all of them
    assert epoch1.value("iobench_loader_cache_misses_total") == 4
    assert epoch1.value("iobench_loader_cache_hits_total") == 0
    assert epoch1.value("iobench_loader_transferred_bytes_total", tier="s3") == sizes
    assert epoch1.value("iobench_loader_cache_fetched_bytes_total") == sizes
    assert epoch1.value("iobench_loader_requests_total", tier="s3") >= 4
    assert epoch1.value("iobench_loader_request_failures_total", tier="s3") == 0
    assert 0 < epoch1.value("iobench_loader_read_bytes_total", tier="cache") <= sizes
    assert (
        epoch2.value("iobench_loader_cache_hits_total") + epoch2.value("iobench_loader_cache_misses_total")
        == 8
    )
    assert epoch2.value("iobench_loader_cache_hits_total") == 4
    assert epoch2.value("iobench_loader_transferred_bytes_total", tier="s3") == sizes  # nothing fetched again
    assert epoch2.value("iobench_loader_samples_total") == 80
    assert epoch2.value("iobench_loader_cache_evictions_total") == 0
    assert_never_decrease(first, epoch1)
    assert_never_decrease(epoch1, epoch2)
    # every loader metric but the two that only count failures; no bucket name, no key
    assert epoch2.names() == LOADER_METRICS - {
        "iobench_loader_request_faults_total",
        "iobench_loader_sample_errors_total",
    }
    text = "\n".join(map(str, epoch2.samples))
    assert bucket not in text and ceph_lab.env["AWS_SECRET_ACCESS_KEY"] not in text
