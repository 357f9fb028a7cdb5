"""The CephFS tier against the lab's real ceph-fuse mount (integration)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import psutil
import pytest

from iobench.lab.daemons import alive, mounted
from iobench.tiers import TierConfigError, make_tier
from iobench.tiers.cephfs import CephFSMountGone
from loaders import ShardLoader


@pytest.fixture
def cephfs_mount(ceph_lab, monkeypatch) -> Path:
    if ceph_lab.mount is None:
        note = json.loads((Path(ceph_lab.dir) / "lab.json").read_text()).get("mount_note")
        reason = f"the lab has no CephFS mount: {note or 'ceph-mds/ceph-fuse not installed'}"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    monkeypatch.setenv("CEPH_CONF", str(ceph_lab.conf))
    return Path(ceph_lab.mount)


def _samples(urls: list[str]) -> Counter:
    loader = ShardLoader(urls, workers=0, return_batches=True, batch_size=32)
    return Counter(
        (k, int(label))
        for batch in loader
        for k, label in zip(batch.keys, batch.labels.tolist(), strict=True)
    )


def test_stage_read_cold_and_describe(cephfs_mount, tiny_dataset):
    tier = make_tier({"kind": "cephfs", "path": str(cephfs_mount / f"tiny-{uuid.uuid4().hex[:6]}")})
    first = tier.upload_dataset(str(tiny_dataset))
    again = tier.upload_dataset(str(tiny_dataset))
    assert " 0 already there" in first and " 0 copied" in again  # idempotent, nothing re-copied
    manifest = tier.load_manifest()
    local = sorted(str(p) for p in Path(tiny_dataset).glob("train-*.tar"))
    expected = _samples(local)
    assert sum(expected.values()) == manifest.num_samples
    assert _samples(tier.shard_urls(manifest)) == expected

    cold = tier.prepare(manifest, "cold")
    assert cold.achieved == "cold" and cold.resident_fraction_before <= 0.05
    assert "ceph-fuse object cache trim" in cold.method and "object cache emptied" in cold.note
    assert "memstore" in cold.note  # the server-side caches it cannot empty are named
    warm = tier.prepare(manifest, "warm")
    assert warm.achieved == "warm" and "object cache holds" in warm.note

    d = tier.describe()
    assert d["mount"]["fs_type"] == "fuse.ceph-fuse" and d["mount"]["mount_point"] == str(cephfs_mount)
    assert d["data_pool"] == "cephfs_data"
    assert d["client"]["admin_socket"].endswith(".asok") and d["client"]["client_oc_size"] > 0
    assert "cluster" in d


def test_a_path_not_on_cephfs_is_a_clear_error(cephfs_mount, tmp_path):
    with pytest.raises(TierConfigError, match="is not on a CephFS mount") as info:
        make_tier({"kind": "cephfs", "path": str(tmp_path)})
    assert str(tmp_path) in str(info.value)


def _abort_fuse_connection(mnt: Path) -> None:
    """What the kernel does when a FUSE daemon dies, done explicitly: a probe must never hang."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == str(mnt):
            abort = Path("/sys/fs/fuse/connections") / fields[2].split(":")[1] / "abort"
            if not abort.parent.exists():
                subprocess.run(
                    ["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"], capture_output=True
                )
            with contextlib.suppress(OSError):
                abort.write_text("1")


def test_a_dead_ceph_fuse_mount_says_remount(ceph_lab, cephfs_mount, tmp_path):
    # A second client of our own, killed, gives the real ENOTCONN without harming the session's mount.
    mnt = Path(ceph_lab.dir) / f"mnt-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    pidfile = tmp_path / "fuse.pid"
    argv = ["ceph-fuse", "-c", str(ceph_lab.conf), "--pid-file", str(pidfile)]
    argv += ["--admin-socket", str(tmp_path / "f.asok"), "--log-file", str(tmp_path / "f.log"), str(mnt)]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)
    try:
        deadline = time.monotonic() + 15
        while not (mounted(mnt) and pidfile.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)
        # every process of this client (ceph-fuse forks; the pid file may name the parent), so the
        # kernel sees the device closed and fails requests instead of waiting for an answer
        pids = {int(pidfile.read_text())} | {
            p.pid for p in psutil.process_iter(["cmdline"]) if str(mnt) in " ".join(p.info["cmdline"] or [])
        }
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        _abort_fuse_connection(mnt)
        with pytest.raises(OSError) as probe:
            os.stat(mnt)
        # ENOTCONN once the kernel noticed; ECONNABORTED while the connection is being torn down
        assert probe.value.errno in (errno.ENOTCONN, errno.ECONNABORTED)
        with pytest.raises(CephFSMountGone, match=f"the CephFS mount at {mnt} went away.*remount"):
            make_tier({"kind": "cephfs", "path": str(mnt / "data")})
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        mnt.rmdir()
