"""Daemons of the lab restarted in the middle of an epoch (integration).

Measured on the lab (memstore, 2 vCPUs): `restart_daemon(dir, "rgw")` takes 0.3-0.6 s, `restart_daemon(dir, "osd")`
1.0-1.8 s (a full OSD stop, so memstore keeps its objects). The restart runs in a thread after batch 3
of a streaming loader (workers=0, 512 KiB ranged GETs, shuffle buffer 8: shards are half-read) and the
loader reads on once the old daemon has exited. radosgw refuses new connections ~10 ms after SIGTERM
but drains kept-alive ones until it exits (~0.27 s), and the new one binds its port before it serves,
so connects wait in the listen backlog: the restart is a ~0.5 s stall, not an error (a store that
has answered is retried until the deadline when it refuses connections: loaders/storage/outage.py;
a restart of seconds under a sweep: test_gateway_restart.py). A radosgw that stays down past the
deadline fails the epoch with the URL, the attempts and what happened.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest

from iobench.datasets.upload import upload_s3
from iobench.lab.conf import OSD, RGW, LabPaths
from iobench.lab.daemons import alive, launch, live_daemons, stop_all
from iobench.lab.restart import restart_daemon
from iobench.tiers.s3 import S3Tier
from loaders import ShardLoader
from loaders.storage.objectstore import ObjectStoreError
from tests.helpers.faultkit import cache_problems


@pytest.fixture
def staged(ceph_lab, tiny_dataset, monkeypatch):
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    url = f"s3://faults-{uuid.uuid4().hex[:8]}/tiny"
    upload_s3(tiny_dataset, url)
    tier = S3Tier(url=url)
    return tier, tier.load_manifest()


def _loader(tier: S3Tier, manifest, cache_dir: str | None = None) -> ShardLoader:
    return ShardLoader(
        tier.shard_urls(manifest),
        workers=0,
        storage_options=tier.storage_options(),
        deadline_s=tier.deadline_s,
        cache_dir=cache_dir,
        cache_bytes=10**9,
        return_batches=True,
        batch_size=16,
        part_bytes=512 * 1024,
        concurrency=2,
        shuffle_buffer=8,  # the default (1000) would read the whole tiny epoch before batch 1
    )


def _epoch_with_restart(
    ceph_lab, loader: ShardLoader, daemon: str
) -> tuple[Counter, float, Exception | None]:
    """Consume an epoch; after batch 3 restart ``daemon`` in a thread and read on while it is down."""
    name = {"rgw": RGW, "osd": OSD}[daemon]
    layout = LabPaths(ceph_lab.dir)
    seen: Counter = Counter()
    took: list[float] = []

    def run() -> None:
        t0 = time.monotonic()
        restart_daemon(ceph_lab.dir, daemon)
        took.append(time.monotonic() - t0)

    thread = threading.Thread(target=run)
    error = None
    try:
        for i, batch in enumerate(loader):
            seen.update(batch.keys)
            if i == 3:  # mid-epoch: 64 of 256 samples delivered, the next shard half-read
                old = live_daemons(layout)[name]
                thread.start()
                deadline = time.monotonic() + 20
                # read on only once the old process is gone: radosgw refuses new connections 10 ms
                # after SIGTERM but drains its kept-alive ones until it exits (~0.27 s), and accepts
                # again ~0.2 s after that (measured); GETs in that gap fail and must be retried
                while alive(old) and time.monotonic() < deadline:
                    time.sleep(0.005)
    except ObjectStoreError as exc:
        error = exc
    finally:
        if thread.is_alive() or thread.ident:
            thread.join(120)
    return seen, (took or [float("nan")])[0], error


@pytest.mark.parametrize(("daemon", "cached"), [("rgw", False), ("osd", False), ("rgw", True)])
def test_a_restart_mid_epoch_is_survived_or_reported(ceph_lab, staged, daemon, cached, tmp_path):
    """``cached``: through the shard cache, whose download of the shard being read is cut short."""
    tier, manifest = staged
    loader = _loader(tier, manifest, str(tmp_path / "cache") if cached else None)
    seen, took, error = _epoch_with_restart(ceph_lab, loader, daemon)
    c = loader.stats.counters.requests
    assert c is not None  # the tier is an object store: its reader counted
    faults = c.faults
    print(
        f"figures: {daemon} restart{' (cached)' if cached else ''} {took:.2f} s mid-epoch; requests "
        f"{c.requests} retries {c.retries} faults {faults}; {len(seen)} samples verified, 0 lost"
    )
    assert took < 30
    # radosgw binds its port before it serves, so a client connecting during the restart waits in the
    # listen backlog rather than being refused: the restart shows as a stall (~0.5 s), rarely a fault.
    # An OSD restart only stalls radosgw's reads (librados waits for the OSD). Neither may fail the epoch.
    assert error is None
    assert set(seen.values()) == {1} and len(seen) == manifest.num_samples  # every sample exactly once
    assert c.failures == 0 and c.retries == sum(faults.values())  # each fault counted
    if cached:  # only whole shards were committed, and no lock or temp file outlived the epoch
        sha = {u: s.sha256 for u, s in zip(tier.shard_urls(manifest), manifest.shards, strict=True)}
        assert cache_problems(tmp_path / "cache", sha) == []


def test_radosgw_down_longer_than_the_deadline_fails_clearly(ceph_lab, staged):
    """A store that answered and then refuses for longer than the deadline (here 3 s): the epoch fails
    at the deadline, naming the URL, the attempts and the outage."""
    tier, manifest = staged
    loader = _loader(S3Tier(url=tier.url, deadline_s=3), manifest)
    layout = LabPaths(ceph_lab.dir)
    it = iter(loader)
    next(it)
    stop_all(layout, {RGW: live_daemons(layout)[RGW]})
    t0 = time.monotonic()
    try:
        with pytest.raises(ObjectStoreError) as info:
            for _ in it:
                pass
        took = time.monotonic() - t0
        msg = str(info.value)
        print(f"figures: radosgw stopped for good, deadline 3 s: the epoch failed after {took:.1f} s: {msg}")
        assert (
            "s3://" in msg
            and "answered earlier, then refused or reset connections until the 3 s deadline" in msg
        )
        assert took < 3 + 2  # the deadline, and the requests already in flight when it stopped
    finally:
        launch(layout, RGW, ["radosgw", "-c", str(layout.conf), "-n", RGW])
        restart_daemon(ceph_lab.dir, "rgw")  # back to a known, serving state for the tests after this one
