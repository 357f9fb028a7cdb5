"""Loaders reading the lab's radosgw through a fault-injecting proxy (tests/faultproxy.py).

At a 15 % fault rate (503 SlowDown, connection resets, truncated bodies, latency spikes) an epoch
delivers exactly the dataset's (key, label) multiset, the shard cache holds only whole shards, and
the loader's counters account for the faults. At 100 % the loader fails within its retry budget
with an error that names the object, the endpoint and the budget.

How the loader's counters relate to what the proxy injected (measured, and asserted below):
SlowDown and truncated bodies are counted one for one. A reset GET is resent once at once by
aiohttp (RFC 9112 lets a client repeat an idempotent request on a broken connection), so a reset
the loader sees cost two injected resets and one that the resend got past is not seen at all:
2 x counted <= injected. Latency spikes are no fault; they show in the request latency p99.

These counts are s3fs's (aiohttp's resend): the tests read with client s3fs. Every client rides
through a radosgw restart and fails within its deadline at a silent or refused endpoint
(test_gateway_restart.py, test_deadlines.py, each parametrised over the clients).
"""

from __future__ import annotations

import gc
import hashlib
import threading
import time
from pathlib import Path

import pytest

from iobench.datasets.manifest import Manifest
from iobench.tiers.s3 import S3Tier
from loaders import ShardLoader
from loaders.observe import CacheStats, RequestCounts
from loaders.storage.objectstore import ObjectReader, ObjectStoreError
from tests.helpers.faultkit import cache_problems, staged_dataset
from tests.helpers.faultproxy import FaultProxy
from tests.helpers.shardkit import key_label_pairs

RATE = 0.15


@pytest.fixture(scope="module")
def staged(lab_env, tiny_dataset):
    return staged_dataset(lab_env, tiny_dataset, "proxy")


@pytest.fixture
def proxy(lab_env):
    with FaultProxy(lab_env.env["AWS_ENDPOINT_URL"], latency_s=0.1) as p:
        yield p


def _loader(url: str, manifest: Manifest, endpoint: str, **kw) -> ShardLoader:
    tier = S3Tier(url=url, endpoint_url=endpoint)
    urls = tier.shard_urls(manifest)
    return ShardLoader(
        urls,
        storage_options=tier.storage_options(),
        shard_sizes={u: s.bytes for u, s in zip(urls, manifest.shards, strict=True)},
        return_batches=True,
        batch_size=16,
        part_bytes=256 * 1024,  # ~14 GETs per 3.6 MB shard: ~150 requests an epoch to hit
        concurrency=2,
        shuffle_buffer=8,
        prefetch_next_epoch=False,  # the proxy's count is the loader's only if no epoch is read ahead
        client="s3fs",
        **kw,
    )


def _check_accounting(what: str, requests: RequestCounts | None, proxy: FaultProxy, samples: int) -> None:
    assert requests is not None  # an object-store reader counted its requests
    injected, counted = proxy.counts, {kind: n for kind, n in requests.faults.items() if n}
    print(
        f"figures: {what}: {proxy.requests} requests, injected {dict(injected)}, loader counted {counted}, "
        f"{samples} samples verified, 0 lost"
    )
    assert set(injected) == {"slowdown", "reset", "truncate", "latency"}  # every kind was exercised
    assert counted.get("throttled_or_5xx", 0) == injected["slowdown"]
    assert counted.get("truncated_body", 0) == injected["truncate"]
    assert 2 * counted.get("connection_reset", 0) <= injected["reset"]
    assert set(counted) <= {"throttled_or_5xx", "truncated_body", "connection_reset"}
    # every fault was retried, none exhausted the budget
    assert requests.retries == sum(counted.values()) and requests.failures == 0


def test_streaming_workers_deliver_every_sample_under_faults(staged, proxy):
    url, manifest, want = staged
    proxy.configure(rate=RATE, seed=1)
    loader = _loader(url, manifest, proxy.endpoint, workers=2)
    got = key_label_pairs(loader)
    assert got == want  # every sample exactly once, with its label
    c = loader.stats.counters.requests
    assert c is not None and c.bytes_transferred == manifest.total_bytes  # only whole ranges were counted
    _check_accounting("streaming, 2 workers, 15 %", c, proxy, sum(got.values()))


def test_a_cache_through_faults_holds_only_whole_shards_and_leaks_nothing(staged, proxy, tmp_path):
    url, manifest, want = staged
    proxy.configure(rate=RATE, seed=2)
    threads_before = set(threading.enumerate())
    cache_dir = tmp_path / "cache"
    loader = _loader(url, manifest, proxy.endpoint, workers=0, cache_dir=str(cache_dir), cache_bytes=10**9)
    assert key_label_pairs(loader) == want
    urls = S3Tier(url=url).shard_urls(manifest)
    sha = {u: s.sha256 for u, s in zip(urls, manifest.shards, strict=True)}
    assert cache_problems(cache_dir, sha) == []
    assert len(list(cache_dir.glob("[0-9a-f]*"))) == len(manifest.shards)
    first = loader.stats.counters.copy()
    _check_accounting("shard cache, 15 %", first.requests, proxy, sum(want.values()))
    # epoch 2 reads the cache only: no request reaches the proxy
    before = proxy.requests
    assert key_label_pairs(loader) == want
    assert proxy.requests == before and (loader.stats.counters.cache or CacheStats()).hits == len(
        manifest.shards
    )
    # nothing outlives the loader: its GET threads end and every connection it opened is closed
    del loader
    deadline = time.monotonic() + 10
    while (_new_threads(threads_before) or proxy.open_connections()) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert _new_threads(threads_before) == [] and proxy.open_connections() == 0


def _new_threads(before: set[threading.Thread]) -> list[str]:
    # fsspec runs one IO loop thread per process for every async filesystem: a singleton, not a leak
    return [
        t.name
        for t in threading.enumerate()
        if t not in before and t.name != "fsspecIO" and not t.name.startswith("asyncio_")
    ]


def test_whole_objects_read_through_truncations_are_exact(staged, proxy):
    url, manifest, _ = staged
    proxy.configure(rate=0.5, kinds=["truncate"], seed=3)
    reader = ObjectReader(
        S3Tier(url=url, endpoint_url=proxy.endpoint).storage_options(), client="s3fs", part_bytes=1 << 20
    )
    entry = manifest.shards[0]
    data = reader.read_range(f"{url}/{entry.name}", 0, entry.bytes)
    assert hashlib.sha256(data).hexdigest() == entry.sha256
    assert reader.take_stats().counts.faults == {"truncated_body": proxy.counts["truncate"]} != {}
    print(
        f"figures: whole object, 50 % truncations: {proxy.counts['truncate']} injected, {entry.bytes} bytes exact"
    )


@pytest.mark.parametrize("kind", ["slowdown", "reset", "truncate"])
def test_past_the_retry_budget_the_epoch_fails_clearly_and_promptly(staged, proxy, kind):
    url, manifest, _ = staged
    proxy.configure(rate=1.0, kinds=[kind], seed=4)
    loader = _loader(url, manifest, proxy.endpoint, workers=1)
    t0 = time.monotonic()
    try:
        key_label_pairs(loader)
    except ObjectStoreError as exc:  # the type survives the worker process
        # without its traceback: the frames hold the DataLoader iterator, whose workers then stop now
        # rather than at a later gc, 5 s late (torch's re-raise makes a reference cycle)
        error = exc.with_traceback(None)
    took = time.monotonic() - t0
    msg = str(error)
    print(
        f"figures: 100 % {kind}: {proxy.counts[kind]} injected, the epoch failed after {took:.1f} s: "
        f"{msg.splitlines()[-1][:400]}"
    )
    assert took < 60  # a hang guard, not a timing claim: 6 attempts back off 1.55 s at most
    assert f"{url}/train-" in msg and f"(endpoint {proxy.endpoint})" in msg
    assert "gave up after 6 attempts" in msg and "retry budget: 6 attempts, backoff up to 2 s" in msg
    words = {"slowdown": "reduce your request rate", "reset": "Connection reset", "truncate": "payload"}
    assert words[kind] in msg


def test_the_proxy_passes_everything_at_rate_zero(staged, proxy, tmp_path):
    url, manifest, _ = staged
    reader = ObjectReader(S3Tier(url=url, endpoint_url=proxy.endpoint).storage_options(), client="s3fs")
    entry = manifest.shards[1]
    out = tmp_path / "shard"
    with open(out, "wb") as f:
        reader.download(f"{url}/{entry.name}", f)
    assert hashlib.sha256(Path(out).read_bytes()).hexdigest() == entry.sha256
    assert proxy.requests >= 2 and not proxy.counts  # a HEAD and at least one GET, untouched
    reader.close()
