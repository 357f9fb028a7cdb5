"""The lab's daemons in one table: for each, the command line it starts with (every daemon finds
the rest in ceph.conf), the check that says it serves, its log, and what is lost while it is down.
`lab up`, `lab restart` and `lab status` all read it, so a daemon is started, awaited and reported
the same way by each.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from iobench.ceph.adminsocket import asok_command

from .conf import FUSE, MDS, MGR, MON, OSD, RGW, LabPaths
from .daemons import LabError, ceph, ceph_json, http_ready, mounted, wait_for

MOUNT_PROBE_S = 2.0  # a mount that does not answer stat() within this counts as gone


@dataclass(frozen=True)
class Daemon:
    name: str  # $name in ceph.conf, and its pid file's name
    argv: list[str]
    awaited: str  # what ``ready`` waits for, as a failure names it ("mon quorum")
    ready: Callable[[], bool]
    log: Path
    serves: str  # what is lost while it is down

    def await_serving(self, layout: LabPaths, pid: int, timeout: float) -> None:
        """Return once it serves; fail at once if ``pid`` exits, or after ``timeout`` seconds."""
        wait_for(self.ready, what=self.awaited, timeout=timeout, layout=layout, daemon=self.name, pid=pid)


def daemon_table(layout: LabPaths, endpoint: str | None) -> dict[str, Daemon]:
    """The daemons of the lab in ``layout``, in start order; ``endpoint``: its S3 endpoint (None for
    a lab.json that has none: radosgw can then be started but not awaited)."""
    conf = str(layout.conf)

    def daemon(name: str, argv: list[str], awaited: str, ready: Callable[[], bool], serves: str) -> Daemon:
        return Daemon(name, argv, awaited, ready, layout.logfile(name), serves)

    fuse_argv = ["ceph-fuse", "-c", conf, "--pid-file", str(layout.pidfile(FUSE))]
    fuse_argv += ["--admin-socket", str(layout.asok(FUSE)), "--log-file", str(layout.logfile(FUSE))]
    # a daemon that is down makes the lab unusable for what it serves (HEALTH_ERR), except the mgr,
    # which only reports (HEALTH_WARN)
    table = [
        daemon(
            MON,
            ["ceph-mon", "-c", conf, "-i", "a"],
            "mon quorum",
            lambda: ceph(layout, "mon", "stat", timeout=10).returncode == 0,
            "no client can connect to the cluster",
        ),
        daemon(
            MGR,
            ["ceph-mgr", "-c", conf, "-i", "x"],
            "mgr available",
            lambda: bool((ceph_json(layout, "mgr", "stat", timeout=10) or {}).get("available")),
            "no statistics (ceph df, PG stats); data is served",
        ),
        daemon(
            OSD,
            ["ceph-osd", "-c", conf, "-i", "0"],
            "osd.0 active",
            lambda: _osd_active(layout),
            "S3, RADOS and CephFS reads and writes hang",
        ),
        daemon(
            RGW,
            ["radosgw", "-c", conf, "-n", RGW],
            f"radosgw serving {endpoint}",
            lambda: _serving_http(layout, endpoint),
            "the S3 endpoint does not answer",
        ),
        daemon(
            MDS,
            ["ceph-mds", "-c", conf, "-i", "a"],
            "an active MDS",
            lambda: _mds_active(layout),
            "CephFS metadata operations hang",
        ),
        daemon(
            FUSE,
            [*fuse_argv, str(layout.mnt)],
            f"the mount on {layout.mnt}",
            lambda: _mount_answers(layout.mnt),
            "the CephFS mount is gone",
        ),
    ]
    return {d.name: d for d in table}


def _osd_active(layout: LabPaths) -> bool:
    """The running OSD itself says it booted and serves (its admin socket: state "active"). The
    mon's map is no witness: after a kill -9 it keeps saying "up" for up to 15 min."""
    try:
        return asok_command(str(layout.asok(OSD)), "status", timeout=2).get("state") == "active"
    except (OSError, AttributeError, ValueError):
        return False


def _mds_active(layout: LabPaths) -> bool:
    dump = ceph_json(layout, "fs", "dump", timeout=10) or {}
    return any(
        i.get("state") == "up:active"
        for fs in dump.get("filesystems", [])
        for i in fs.get("mdsmap", {}).get("info", {}).values()
    )


def _serving_http(layout: LabPaths, endpoint: str | None) -> bool:
    if not endpoint:
        raise LabError(f"{layout.lab_json} has no endpoint: is this a lab made by `iobench lab up`?")
    return http_ready(endpoint + "/")


def _mount_answers(path: Path) -> bool:
    """The mount is there and stat() on it returns (a dead FUSE daemon leaves it hanging or ENOTCONN)."""
    if not mounted(path):
        return False
    result: list[bool] = []

    def probe() -> None:
        try:
            os.stat(path)
            result.append(True)
        except OSError:
            result.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(MOUNT_PROBE_S)
    return bool(result and result[0])
