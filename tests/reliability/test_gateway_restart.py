"""A gateway restart ridden through, and a wrong endpoint still failing fast (integration, against
the session's lab).

radosgw is killed with kill -9 in the middle of a real 2-rank `iobench sweep` over S3 (streamed, no
cache; one DataLoader worker per rank, paced by the emulated accelerator so the tier is being read
when the kill lands) and started again 3-5 s later: the cell completes, every sample of every epoch
is delivered exactly once across the ranks, and the cell's summary and report count the refused
connections and the seconds lost. The same tier settings (a 20 s deadline) against an endpoint
that never answered, closed or dropping connections, fail in seconds: at the cell's first read (the
manifest) and at a DataLoader worker's. The figures of four runs are in docs/reliability.md (§11).
And the same restart under each object client's reader, read through with every byte exact.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import random
import socket
import threading
import time
from collections.abc import Iterator

import pyarrow.parquet as pq
import pytest

from iobench.datasets.manifest import Manifest
from iobench.lab.conf import RGW
from iobench.lab.restart import restart_daemon
from iobench.tiers import make_tier
from loaders import ShardLoader
from loaders.observe import LoaderCounters
from loaders.storage import CLIENT_NAMES, ObjectStoreError
from loaders.storage.objectstore import ObjectReader
from tests.helpers.faultkit import kill9, stage_copy
from tests.helpers.lab_fixture import mend
from tests.helpers.sweepkit import assert_each_sample_once, env_of, s3_tier, stepping, sweep_file

DEADLINE = 20  # the tier's deadline_s: longer than the restart, and than a wrong endpoint may take
FAST = 10  # the bound for an endpoint that never answered


def test_a_radosgw_killed_and_restarted_mid_cell_is_ridden_through(
    ceph_lab, iobench_sweep, tiny_dataset, tmp_path
):
    env = env_of(ceph_lab)
    # 40 samples/s a rank: 8 steps of 0.4 s an epoch, 2 epochs; the kill lands at step 3
    config = sweep_file(
        tmp_path,
        tiny_dataset,
        s3_tier("restart", DEADLINE),
        samples_per_s=40,
        epochs=2,
        ranks_per_node=2,
        sync="none",
        record_keys=True,
    )
    out = tmp_path / "run"
    proc = iobench_sweep.start(config, "--out", out, env=env)
    try:
        cell_id = stepping(out, proc)
        down_s = random.uniform(3.0, 5.0)
        _, t_kill = kill9(ceph_lab, RGW)
        time.sleep(down_s)
        t0 = time.monotonic()
        restart_daemon(ceph_lab.dir, "rgw")
        t_back = time.monotonic()
        output, _ = proc.communicate(timeout=240)
    finally:
        mend(ceph_lab)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-4000:]
    summary = json.loads((out / cell_id / "summary.json").read_text())
    assert summary["status"] == "ok", summary.get("error")
    # nothing lost: each epoch delivered every sample of the dataset once across the two ranks
    assert_each_sample_once(out / cell_id, tiny_dataset, world_size=2, epochs=2)
    assert [e["samples"] for e in summary["epochs"]] == [256, 256]
    c = LoaderCounters.from_flat(summary["loader_stats_all_steps"]["counters"]).requests
    assert c is not None
    faults = c.faults
    print(
        f"figures: radosgw kill -9 at step 3 of a 2-rank cell, down {down_s:.1f} s, restart took "
        f"{t_back - t0:.2f} s ({t_back - t_kill:.1f} s without radosgw): cell ok, "
        f"{sum(e['samples'] for e in summary['epochs'])} samples, each once per epoch; requests "
        f"{c.requests}, refused connections {c.refused_connections}, outage {c.outage_s:.1f} s "
        f"(summed over 2 reader processes), retries {c.retries}, faults {faults}"
    )
    # the outage was counted: refusals of a store that had answered, each retried, none failing
    assert c.refused_connections >= 1 and c.failures == 0
    assert c.refused_connections <= faults.get("connect_failed", 0) + faults.get("connection_reset", 0)
    assert c.retries == sum(faults.values())
    # each of the two readers held up for at most the time radosgw was away plus one capped backoff
    # (1 s) and a request; at least one of them waited out most of it
    assert 1.0 <= c.outage_s <= 2 * (t_back - t_kill + 2.0)
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    assert (row["refused_connections"], row["outage_s"]) == (c.refused_connections, c.outage_s)
    report = " ".join(iobench_sweep.run("report", out).stdout.split())
    assert (
        f"storage outage ridden through: {c.refused_connections:,} connections refused or reset "
        f"by the store after it had answered, each retried; {c.outage_s:.1f} s of reading lost"
    ) in report, report


@contextlib.contextmanager
def _never_answering(kind: str) -> Iterator[str]:
    """An endpoint that never answered: ``closed`` (nothing listens: connections refused) or
    ``dropping`` (a listener whose queue is full, so the kernel drops new connections' SYNs, as a
    firewall or a host that is gone does: the client's connect times out)."""
    server = socket.create_server(("127.0.0.1", 0), backlog=0)
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
    fillers = [socket.socket() for _ in range(3 if kind == "dropping" else 0)]
    for f in fillers:
        f.setblocking(False)
        f.connect_ex(server.getsockname())
    if kind == "closed":
        server.close()
    try:
        yield endpoint
    finally:
        for s in [*fillers, server]:
            s.close()


# dropping waits out two 5 s connect timeouts: slow by hand (no fixture says so)
@pytest.mark.parametrize("kind", ["closed", pytest.param("dropping", marks=pytest.mark.slow)])
def test_an_endpoint_that_never_answered_still_fails_within_10_s(tiny_dataset, kind, monkeypatch):
    """With the deadline that rides through a restart (20 s): at the cell's first read (the
    manifest), and at a DataLoader worker's first read of a shard (no request ever reaches a server:
    any keys do)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    manifest = Manifest.load(tiny_dataset)
    with _never_answering(kind) as endpoint:
        tier = make_tier(
            {"kind": "s3", "url": "s3://nowhere/tiny", "endpoint_url": endpoint, "deadline_s": DEADLINE}
        )
        t0 = time.monotonic()
        with pytest.raises(ObjectStoreError) as setup:
            tier.load_manifest()
        at_setup = time.monotonic() - t0
        loader = ShardLoader(
            tier.shard_urls(manifest), workers=1, return_batches=True, source=tier.source(manifest)
        )
        t0 = time.monotonic()
        with pytest.raises(ObjectStoreError) as worker:
            next(iter(loader))
        at_worker = time.monotonic() - t0
        loader.close()
    print(
        f"figures: an endpoint that never answered ({kind}), deadline {DEADLINE} s: the manifest read "
        f"failed after {at_setup:.1f} s, a worker's first read after {at_worker:.1f} s; {setup.value}"
    )
    assert at_setup < FAST and at_worker < FAST
    for error in (setup.value, worker.value):
        words = "gave up after 6 attempts" if kind == "closed" else "has not answered before"
        assert endpoint in str(error) and words in str(error), error


@pytest.fixture(scope="module")
def restart_staged(ceph_lab, tiny_dataset) -> str:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in ceph_lab.env.items():
            mp.setenv(key, value)
        return stage_copy(ceph_lab, tiny_dataset, "restart")


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_each_client_rides_through_a_radosgw_restart(
    ceph_lab, tiny_dataset, restart_staged, client, monkeypatch
):
    """A reader of each client reads the dataset's shards over and over (ranged GETs, two in
    flight) while radosgw is killed and started again 2-3 s later: every shard read whole and
    exact, the refusals counted as an outage, none a failure."""
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    manifest = Manifest.load(tiny_dataset)
    url = restart_staged
    tier = make_tier({"kind": "s3", "url": url, "deadline_s": DEADLINE})
    reader = ObjectReader(
        tier.storage_options(), client=client, deadline_s=DEADLINE, part_bytes=512 * 1024, concurrency=2
    )
    shards = [(f"{url}/{s.name}", s.bytes, s.sha256) for s in manifest.shards]
    stop, reads, wrong, errors = threading.Event(), [0], [], []

    def read_on() -> None:
        try:
            while not stop.is_set():
                for where, size, sha in shards:
                    out = io.BytesIO()
                    reader.download(where, out, size)
                    if hashlib.sha256(out.getvalue()).hexdigest() != sha:
                        wrong.append(where)
                    reads[0] += 1
        except Exception as exc:  # the test fails on it below, with its message
            errors.append(exc)

    reader.read_range(shards[0][0], 0, 10)  # the store has answered: its refusals are an outage
    t = threading.Thread(target=read_on)
    t.start()
    try:
        time.sleep(0.5)
        _, t_kill = kill9(ceph_lab, RGW)
        time.sleep(random.uniform(2.0, 3.0))
        restart_daemon(ceph_lab.dir, "rgw")
        t_back = time.monotonic()
        before = reads[0]
        while reads[0] < before + len(shards) and not errors and time.monotonic() - t_back < DEADLINE:
            time.sleep(0.1)  # a whole pass after the restart
    finally:
        stop.set()
        t.join(DEADLINE + 10)
        mend(ceph_lab)
        reader.close()
    stats = reader.take_stats().counts
    print(
        f"figures: {client} through a radosgw restart ({t_back - t_kill:.1f} s without radosgw): {reads[0]} "
        f"shards read, {stats.requests} requests, refused connections {stats.refused_connections}, outage "
        f"{stats.outage_s:.1f} s, faults {stats.faults}, {stats.client_retries} hidden retries known"
    )
    assert not errors, errors[0]
    assert wrong == [] and reads[0] >= before + len(shards)
    assert stats.failures == 0 and stats.refused_connections >= 1
    assert 1.0 <= stats.outage_s <= t_back - t_kill + 2.0
