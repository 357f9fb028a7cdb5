"""The Ceph lab as a pytest session fixture: one real cluster per test session.

tests/conftest.py registers this module once as a plugin (``pytest_plugins``), so each
session-scoped lab below is started once, on first use, and stopped at the session's end; a test
module must not import the fixtures (that would register a second definition, and a second lab).
It runs on random non-default ports and in a short temporary directory, so a user's own lab is not
disturbed.
When Ceph is not installed it fails under ``CI`` (an integration test never skips silently there)
and skips elsewhere, both with the apt-get line that installs it.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from iobench.lab import CephMissingError, LabInfo, down, install_hint, up
from iobench.lab.daemons import port_free


def free_ports(n: int, lo: int = 20000, hi: int = 32000) -> list[int]:
    """``n`` distinct free ports below the ephemeral range (so no client socket takes one meanwhile)."""
    ports: list[int] = []
    while len(ports) < n:
        p = random.randint(lo, hi)
        if p not in ports and port_free(p):
            ports.append(p)
    return ports


def cephfs_installed() -> bool:
    return bool(shutil.which("ceph-mds") and shutil.which("ceph-fuse"))


def ceph_missing(message: str) -> None:
    """Fail under CI, skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def lab_dir(tmp_dir: str | os.PathLike[str]) -> Path:
    """``tmp_dir/lab``, or a fresh dir under /tmp when that is too long for admin socket paths."""
    d = Path(tmp_dir) / "lab"
    if len(str(d)) > 60:
        d = Path(tempfile.mkdtemp(prefix="iobench-lab-", dir="/tmp")) / "lab"
    return d


def start_lab(
    tmp_dir: str | os.PathLike[str],
    *,
    cephfs: bool | None = None,
    with_mgr: bool = False,
    objectstore: str = "memstore",
) -> LabInfo:
    """Bring a lab up in ``tmp_dir`` on free ports; CephFS (mounted when FUSE allows) if installed.

    No mgr by default: S3, librados and CephFS work without it, and it costs 300 MB and ~1 s.
    memstore by default (fastest); ``objectstore="bluestore"`` for a lab whose OSD may be killed
    (memstore loses what was written since its last clean stop; bluestore keeps everything).
    """
    s3, v2, v1 = free_ports(3)
    try:
        return up(
            lab_dir(tmp_dir),
            port=s3,
            mon_ports=(v2, v1),
            with_mgr=with_mgr,
            objectstore=objectstore,
            memstore_bytes=2 << 30,
            bluestore_bytes=4 << 30,
            cephfs=cephfs_installed() if cephfs is None else cephfs,
        )
    except CephMissingError as e:
        ceph_missing(f"{e}")
        raise  # not reached


def mend(lab: LabInfo) -> list[str]:
    """Start every daemon of ``lab`` that is down (killed by a test); the names started."""
    from iobench.lab import restart, status

    down_ = [n for n, d in status(lab.dir)["daemons"].items() if not d["alive"]]
    short = {"mon.a": "mon", "mgr.x": "mgr", "osd.0": "osd", "client.rgw.x": "rgw", "mds.a": "mds"}
    for name in ["mon.a", "mgr.x", "osd.0", "client.rgw.x", "mds.a", "ceph-fuse"]:
        if name in down_:
            restart(lab.dir, short.get(name, "fuse"))
    return down_


def require_ceph() -> None:
    """Fail under CI, skip elsewhere, when Ceph is not installed."""
    if not shutil.which("radosgw"):
        ceph_missing(f"Ceph is not installed; install it with: {install_hint(cephfs=True)}")


# Waits for the test session's process to end, then takes the lab down: a session killed before its
# teardown (a time-out's SIGTERM, a closed terminal) would otherwise leave the daemons running.
_DOWN_WHEN_GONE = """
import sys, psutil
from iobench.lab import down
try:
    psutil.Process(int(sys.argv[1])).wait()
except psutil.NoSuchProcess:
    pass
down(sys.argv[2], purge=True)
"""


def _down_when_session_ends(lab_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _DOWN_WHEN_GONE, str(os.getpid()), str(lab_dir)],
        start_new_session=True,  # outside the session's process group, so a kill of the group spares it
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _session_lab(tmp_dir: Path, **kwargs) -> Iterator[LabInfo]:
    require_ceph()
    lab = start_lab(tmp_dir, **kwargs)
    watcher = _down_when_session_ends(lab.dir)
    try:
        yield lab
    finally:
        watcher.kill()
        watcher.wait()
        down(lab.dir, purge=True)


@pytest.fixture(scope="session")
def ceph_lab(tmp_path_factory) -> Iterator[LabInfo]:
    """The session's Ceph lab: ``.endpoint``, ``.access_key``, ``.secret_key``, ``.conf``, ``.dir``,
    ``.env`` (the DIR/env variables), ``.mount`` (CephFS mount point or None)."""
    yield from _session_lab(tmp_path_factory.mktemp("ceph"))


@pytest.fixture(scope="module")
def lab_env(ceph_lab) -> Iterator[LabInfo]:
    """The session's lab, its credentials and endpoint in the environment for a module's tests
    (where every object client looks for them)."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in ceph_lab.env.items():
            mp.setenv(key, value)
        yield ceph_lab


@pytest.fixture(scope="session")
def breakable_lab(tmp_path_factory) -> Iterator[LabInfo]:
    """A second lab, for tests that kill its daemons: bluestore (a sparse file, so an OSD killed
    with kill -9 loses nothing), CephFS when installed, its own directory and ports. A test that
    breaks it mends it; ``lab_to_break`` also mends it before each test."""
    yield from _session_lab(tmp_path_factory.mktemp("cephb"), objectstore="bluestore")


@pytest.fixture
def lab_to_break(breakable_lab) -> Iterator[LabInfo]:
    """The breakable lab with every daemon up, mended again after the test whatever it killed."""
    mend(breakable_lab)
    yield breakable_lab
    mend(breakable_lab)


@pytest.fixture
def own_lab_dir(tmp_path) -> Path:
    """A directory for a lab the test brings up (and takes down) itself: one it makes fail, stops
    or restarts in ways the session's labs must not see. Ceph must be installed."""
    require_ceph()
    return lab_dir(tmp_path)
