"""The throttled tier in front of the lab's S3 with a shard cache: only the cache's misses cross the
link (moved from tests/unit/tiers/test_throttled.py, which needs no services)."""

from __future__ import annotations

import time
import uuid

from iobench.tiers import make_tier
from loaders.observe import LoaderCounters
from loaders.observe.stages import StageStats
from loaders.pipeline.shard_samples import ShardSamples
from loaders.storage.sources import ShardSource

MB = 10**6


def _samples(source: ShardSource, urls: list[str]) -> list:
    return list(ShardSamples(urls, source))


def test_with_an_inner_shard_cache_only_misses_cross_the_link(ceph_lab, tiny_dataset, tmp_path, monkeypatch):
    from iobench.datasets.upload import upload_s3

    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    url = f"s3://iobench-{uuid.uuid4().hex[:8]}/tiny"
    upload_s3(tiny_dataset, url)
    inner = {"kind": "s3", "url": url, "cache_dir": str(tmp_path / "cache")}
    tier = make_tier({"kind": "throttled", "inner": inner, "bandwidth": "20MB/s", "latency_ms": 50})
    manifest = tier.load_manifest()
    urls = tier.shard_urls(manifest)[:3]
    spec = tier.source(manifest)
    source = ShardSource(spec)
    nbytes = sum(spec.shard_sizes[u] for u in urls)

    def timed_pass() -> tuple[list, float, LoaderCounters]:
        t0 = time.perf_counter()
        samples = _samples(source, urls)
        wall = time.perf_counter() - t0
        stats = StageStats()
        source.drain_into(stats)
        return samples, wall, stats.counters

    cold, cold_wall, cold_counters = timed_pass()
    warm, warm_wall, warm_counters = timed_pass()
    print(f"{nbytes / MB:.1f} MB: cold (misses) {cold_wall:.2f} s, warm (hits) {warm_wall:.2f} s")
    assert [(s.key, s.parts) for s in warm] == [(s.key, s.parts) for s in cold]
    assert cold_counters.cache is not None and cold_counters.cache.misses == 3
    assert cold_counters.throttle is not None and cold_counters.throttle.requests == 3
    assert cold_wall >= (nbytes - tier.burst_bytes) / tier.bytes_per_s
    assert warm_counters.cache is not None and warm_counters.cache.hits == 3
    assert warm_counters.throttle is None  # nothing crossed the link
    assert warm_wall < cold_wall / 3  # hits come from the local cache, in front of the link
