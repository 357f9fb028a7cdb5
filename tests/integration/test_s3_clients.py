"""Every object client against the lab's real radosgw (integration): the same bytes through each,
whole objects, ranged GETs of a shard's part and downloads into the shard cache; a tier read with
its client, which its description names; a loader epoch through each delivering exactly the
dataset; and, behind a fault-injecting proxy, every fault retried and counted, with the requests
the proxy saw matching the reader's own count for each client whose retries are turned off.
"""

from __future__ import annotations

import hashlib
import io
from collections import Counter

import pytest

from iobench.tiers import make_tier
from loaders import ShardLoader
from loaders.storage import (
    CLIENT_NAMES,
    CLIENTS,
    ObjectStoreError,
    ShardSource,
    SourceSpec,
    installed_clients,
    survives_fork,
)
from loaders.storage.objectstore import ObjectReader
from tests.helpers.faultkit import staged_dataset
from tests.helpers.faultproxy import FaultProxy
from tests.helpers.shardkit import key_label_pairs

RATE = 0.15


@pytest.fixture(scope="module")
def staged(lab_env, tiny_dataset):
    return staged_dataset(lab_env, tiny_dataset, "clients")


def test_every_client_is_installed_here():
    # the test extra installs them all: a client missing would leave its tests below unrun
    assert installed_clients() == list(CLIENT_NAMES)


def _reader(client: str, endpoint: str | None = None, **kw) -> ObjectReader:
    tier = make_tier({"kind": "s3", "url": "s3://b/p", **({"endpoint_url": endpoint} if endpoint else {})})
    return ObjectReader(tier.storage_options(), client=client, deadline_s=20, **kw)


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_each_client_reads_the_same_bytes_every_way(staged, client, tmp_path):
    url, manifest, _ = staged
    reader = _reader(client, part_bytes=1 << 20, concurrency=3)
    assert reader.client == client
    for entry in manifest.shards[:3]:
        where = f"{url}/{entry.name}"
        assert reader.info(where)["size"] == entry.bytes
        whole = reader.read_range(where, 0, entry.bytes)
        assert isinstance(whole, bytes) and hashlib.sha256(whole).hexdigest() == entry.sha256
        with open(tmp_path / entry.name, "wb") as out:  # the shard cache's download: parts written in place
            assert reader.download(where, out, entry.bytes) == entry.bytes
        assert hashlib.sha256((tmp_path / entry.name).read_bytes()).hexdigest() == entry.sha256
        start, end = entry.bytes // 3, 2 * entry.bytes // 3 + 7  # a part of a split shard
        with reader.open_stream(where, entry.bytes, start, end) as stream:
            assert stream.read() == whole[start:end]
    stats = reader.take_stats().counts
    assert stats.failures == 0 and stats.retries == 0 and stats.client_cpu_s > 0
    missing = f"{url}/no-such-shard.tar"
    with pytest.raises(
        ObjectStoreError, match=rf"GET {missing} \(endpoint http://127.0.0.1:\d+\): no such bucket or object"
    ):
        reader.read_range(missing, 0, 10)
    with pytest.raises(ObjectStoreError, match="no such bucket or object"):
        reader.info(missing)
    stats = reader.take_stats().counts
    assert (stats.requests, stats.failures, stats.retries) == (2, 2, 0)  # failed at once, no retry
    reader.close()


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_a_tier_is_read_with_its_client_and_says_which(staged, client):
    url, manifest, want = staged
    tier = make_tier({"kind": "s3", "url": url, "client": client})
    described = tier.describe()
    assert described["client"] == client and described["client_version"]
    assert tier.load_manifest() == manifest  # through s3fs where the client does not survive a fork
    source = tier.source(manifest)
    assert source.client == client and source.answered_endpoints  # it answered: restarts ride through
    # a client whose runtime does not survive a fork was used in this process by the tests above:
    # its workers start as the docs say they must then
    start = {} if survives_fork(client) else {"multiprocessing_context": "spawn"}
    loader = ShardLoader(
        tier.shard_urls(manifest), workers=1, return_batches=True, batch_size=32, source=source, **start
    )
    assert key_label_pairs(loader) == want
    c = loader.stats.counters.requests
    assert c is not None and c.bytes_transferred == manifest.total_bytes and c.failures == 0
    assert c.client_cpu_s > 0 and c.requests >= len(manifest.shards)


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_through_faults_each_client_reads_exactly_and_counts_every_request(staged, lab_env, client):
    url, manifest, _ = staged
    with FaultProxy(lab_env.env["AWS_ENDPOINT_URL"]) as proxy:
        proxy.configure(rate=RATE, kinds=("slowdown", "reset", "truncate"), seed=3)
        reader = _reader(client, proxy.endpoint, part_bytes=256 * 1024, concurrency=2)
        for entry in manifest.shards:  # ~14 ranged GETs a shard: ~140 requests to hit
            out = io.BytesIO()
            reader.download(f"{url}/{entry.name}", out, entry.bytes)
            assert hashlib.sha256(out.getvalue()).hexdigest() == entry.sha256
        stats = reader.take_stats().counts
        reader.close()
    faults = Counter(stats.faults)
    print(
        f"figures: {client} through 15 % faults: proxy saw {proxy.requests} requests, injected "
        f"{dict(proxy.counts)}; the reader counted {stats.requests} requests, faults {dict(faults)}, "
        f"{stats.client_retries} hidden retries known"
    )
    assert sum(proxy.counts.values()) >= 5  # faults were met
    assert stats.failures == 0 and stats.retries == sum(faults.values()) >= 1
    assert stats.bytes_transferred == manifest.total_bytes  # only whole ranges counted as read
    # retries off: every request the store saw is counted
    if CLIENTS.entry(client).load().own_retries is None:
        assert proxy.requests == stats.requests
        injected = {"throttled_or_5xx": "slowdown", "connection_reset": "reset", "truncated_body": "truncate"}
        assert faults == {kind: proxy.counts[k] for kind, k in injected.items() if proxy.counts[k]}
    else:  # aiohttp's resend, the CRT's retry: the store saw more than the reader made
        assert proxy.requests >= stats.requests + stats.client_retries


@pytest.mark.parametrize("client", [c for c in CLIENT_NAMES if not survives_fork(c)])
def test_a_client_that_does_not_survive_a_fork_says_so_instead_of_hanging(staged, client):
    """obstore and s3dlio run on a tokio runtime, whose threads a forked process does not have:
    their requests in a DataLoader worker forked after the main process used them hung for good
    (measured). The worker fails at once, naming the way out."""
    url, manifest, _ = staged
    spec = SourceSpec(client=client, deadline_s=20)
    urls = [f"{url}/{s.name}" for s in manifest.shards]
    main = ShardSource(spec)
    assert len(main.read_object(urls[0])) == manifest.shards[0].bytes  # the runtime starts here
    main.close()
    loader = ShardLoader(urls, workers=1, return_batches=True, batch_size=32, source=spec)
    with pytest.raises(RuntimeError, match=rf"{client}'s runtime does not survive a fork.*forkserver"):
        next(iter(loader))
    loader.close()
