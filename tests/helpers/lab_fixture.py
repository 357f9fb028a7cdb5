"""The Ceph lab as a pytest session fixture: one real cluster per test session.

Import it in tests/conftest.py (``from tests.helpers.lab_fixture import ceph_lab_fixture  # noqa: F401``;
the fixture's name is ``ceph_lab``). It runs on
random non-default ports and in a short temporary directory, so a user's own lab is not disturbed.
When Ceph is not installed it fails under ``CI`` (an integration test never skips silently there)
and skips elsewhere, both with the apt-get line that installs it.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from iobench.lab import CephMissingError, LabInfo, down, install_hint, up
from iobench.lab.daemons import port_free

_SESSION: dict[str, object] = {}  # one lab even when the fixture is registered twice


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


@pytest.fixture(scope="session", name="ceph_lab")
def ceph_lab_fixture(tmp_path_factory) -> Iterator[LabInfo]:
    """The session's Ceph lab: ``.endpoint``, ``.access_key``, ``.secret_key``, ``.conf``, ``.dir``,
    ``.env`` (the DIR/env variables), ``.mount`` (CephFS mount point or None)."""
    if not shutil.which("radosgw"):
        ceph_missing(f"Ceph is not installed; install it with: {install_hint(cephfs=True)}")
    if "lab" not in _SESSION:
        _SESSION["lab"] = start_lab(tmp_path_factory.mktemp("ceph"))
        _SESSION["users"] = 0
    _SESSION["users"] = int(_SESSION["users"]) + 1  # type: ignore[call-overload]
    lab: LabInfo = _SESSION["lab"]  # type: ignore[assignment]
    try:
        yield lab
    finally:
        _SESSION["users"] = int(_SESSION["users"]) - 1  # type: ignore[call-overload]
        if _SESSION["users"] == 0:
            del _SESSION["lab"]
            down(lab.dir, purge=True)


@pytest.fixture(scope="session", name="breakable_lab")
def breakable_lab_fixture(tmp_path_factory) -> Iterator[LabInfo]:
    """A second lab, for tests that kill its daemons: bluestore (a sparse file, so an OSD killed
    with kill -9 loses nothing), CephFS when installed, its own directory and ports. A test that
    breaks it mends it; ``lab_to_break`` also mends it before each test.

    Import it where it is used (``from tests.helpers.lab_fixture import breakable_lab_fixture``);
    one lab serves the session even when several modules import it."""
    if not shutil.which("radosgw"):
        ceph_missing(f"Ceph is not installed; install it with: {install_hint(cephfs=True)}")
    if "breakable" not in _SESSION:
        _SESSION["breakable"] = start_lab(tmp_path_factory.mktemp("cephb"), objectstore="bluestore")
        _SESSION["breakable_users"] = 0
    _SESSION["breakable_users"] = int(_SESSION["breakable_users"]) + 1  # type: ignore[call-overload]
    lab: LabInfo = _SESSION["breakable"]  # type: ignore[assignment]
    try:
        yield lab
    finally:
        _SESSION["breakable_users"] = int(_SESSION["breakable_users"]) - 1  # type: ignore[call-overload]
        if _SESSION["breakable_users"] == 0:
            del _SESSION["breakable"]
            down(lab.dir, purge=True)


@pytest.fixture(name="lab_to_break")
def lab_to_break_fixture(breakable_lab) -> Iterator[LabInfo]:
    """The breakable lab with every daemon up, mended again after the test whatever it killed."""
    mend(breakable_lab)
    yield breakable_lab
    mend(breakable_lab)
