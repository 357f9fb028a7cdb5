"""`iobench lab`: a real single-node Ceph (mon, OSD, radosgw, optional mgr and CephFS) on 127.0.0.1.

    info = up("~/.cache/iobench/lab")      # ~3 s on memstore; writes DIR/env (0600) and DIR/lab.json
    status(info.dir)                        # each daemon up/down (its process), health, endpoint
    restart(info.dir, "osd")                # one daemon (or all), keeping the cluster
    down(info.dir)                          # stops only the processes this lab started, in order;
    up(info.dir)                            #   the same cluster back (pools, buckets, keys, files)
    down(info.dir, purge=True)              # and gone

After ``up``, ``. DIR/env`` gives boto3, s3fs, the ceph CLI and iobench the endpoint and keys.
Facts behind every choice: notes/ceph.md (feasibility run on the CI machine type).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from typing import Any

from .bringup import remove_entries, up
from .conf import (
    DEFAULT_MON_PORTS,
    DEFAULT_PORT,
    FUSE,
    MGR,
    MON,
    OBJECTSTORES,
    SHORT,
    STORE_KEEPS,
    LabInfo,
    LabPaths,
    default_lab_dir,
    lab_meta,
    lab_paths,
    read_env,
)
from .daemons import (
    CephMissingError,
    LabError,
    ceph,
    ceph_json,
    install_hint,
    live_daemons,
    mounted,
    owned,
    recorded_pids,
    rss_bytes,
    stop_all,
    unmount,
)
from .daemontable import daemon_table
from .restart import RESTARTABLE, restart_daemon

__all__ = [
    "DEFAULT_MON_PORTS",
    "DEFAULT_PORT",
    "OBJECTSTORES",
    "CephMissingError",
    "LabError",
    "LabInfo",
    "default_lab_dir",
    "down",
    "install_hint",
    "purge",
    "read_env",
    "restart",
    "status",
    "up",
]


def down(
    lab_dir: str | os.PathLike[str] | None = None, *, purge: bool = False, timeout: float = 15.0
) -> dict:
    """Unmount CephFS, stop this lab's daemons (rgw/mds, then mgr+osd, then mon); ``purge`` removes DIR."""
    layout = lab_paths(lab_dir)
    t0 = time.monotonic()
    result: dict[str, Any] = {"dir": str(layout.dir), "unmounted": False}
    if mounted(layout.mnt):
        error = unmount(layout.mnt)
        result["unmounted"] = error is None
        if error:
            result["unmount_error"] = error
    pids = recorded_pids(layout, lab_meta(layout).get("pids"))
    stopped = stop_all(layout, {n: p for n, p in pids.items() if n == FUSE}, timeout=timeout)
    live = live_daemons(layout, pids)
    if MON in live and any(n.startswith("mds.") for n in live):
        # A SIGTERMed active MDS takes 4-8 s to hand its rank back; failing the fs first makes it
        # exit in 0.1 s. It loses nothing: `up` (restart.start_daemon) makes the fs joinable again.
        ceph(layout, "fs", "fail", "cephfs", timeout=10)
    stopped.update(stop_all(layout, {n: p for n, p in pids.items() if n != FUSE}, timeout=timeout))
    for _ in range(3):  # an MDS may re-execute itself (same pid) as a standby: stop that one too
        time.sleep(0.3)
        respawned = live_daemons(layout, pids)
        if not respawned:
            break
        stopped.update(stop_all(layout, respawned, timeout=timeout))
    result["stopped"] = stopped
    if mounted(layout.mnt):  # ceph-fuse is gone now; a lazy unmount clears the dead mount point
        subprocess.run(["umount", "-l", str(layout.mnt)], capture_output=True)
    result["seconds"] = round(time.monotonic() - t0, 2)
    if purge:
        _purge(layout)
    result["purged"] = purge
    return result


def restart(
    lab_dir: str | os.PathLike[str] | None = None,
    daemon: str | None = None,
    *,
    timeout: float = 120.0,
    progress: Any = None,
) -> dict:
    """Restart one daemon ("mon", "mgr", "osd", "rgw", "mds", "fuse") or, with None or "all", every
    daemon (`down`, then `up` on the same directory), keeping the cluster: its pools, buckets, keys
    and files, as far as its object store keeps them (conf.STORE_KEEPS). A daemon that died is
    simply started. Returns {"restarted": {name: how the old one ended}, "seconds", "notes"}."""
    if daemon not in (None, "all"):
        if daemon not in RESTARTABLE:
            raise ValueError(f"daemon {daemon!r}: restartable daemons are {', '.join(RESTARTABLE)} or all")
        return restart_daemon(lab_dir, daemon, timeout=timeout)
    layout = lab_paths(lab_dir)
    if not lab_meta(layout).get("fsid"):
        raise LabError(
            f"{layout.dir} holds no lab made by `iobench lab up` (no lab.json): nothing to restart"
        )
    t0 = time.monotonic()
    res = down(layout.dir, timeout=timeout)
    up(layout.dir, timeout=timeout, progress=progress)
    return {"restarted": res["stopped"], "seconds": round(time.monotonic() - t0, 2), "notes": []}


def purge(lab_dir: str | os.PathLike[str] | None = None) -> dict:
    return down(lab_dir, purge=True)


def _purge(layout: LabPaths) -> None:
    if mounted(layout.mnt):
        raise LabError(f"{layout.mnt} is still mounted: unmount it (umount {layout.mnt}) before purging")
    still = live_daemons(layout, lab_meta(layout).get("pids"))
    if still:
        raise LabError(f"daemons still running in {layout.dir}: {still}; not purging")
    remove_entries(layout)
    with contextlib.suppress(OSError):
        layout.dir.rmdir()  # only when nothing but the lab was in it


# Ceph's own view of the health is merged in when the mon answers
_LEVEL = {"HEALTH_OK": 0, "HEALTH_WARN": 1, "HEALTH_ERR": 2}


def status(lab_dir: str | os.PathLike[str] | None = None) -> dict:
    """The lab as it is: each daemon up or down (its process, not the mon's map, which keeps a
    killed OSD "up" for up to 15 minutes) with pid, RSS and log; health from both; endpoint, mount.

    ``health`` is the worse of Ceph's own (``ceph_health``, when the mon answers) and the daemons'
    state: a recorded daemon whose process is gone is a DAEMON_DOWN check (HEALTH_ERR, HEALTH_WARN
    for the mgr), a dead mon HEALTH_ERR with no Ceph view at all.
    """
    layout = lab_paths(lab_dir)
    meta = lab_meta(layout)
    table = daemon_table(layout, meta.get("endpoint"))
    daemons = {}
    for name, pid in recorded_pids(layout, meta.get("pids")).items():
        up_ = owned(pid, layout.conf)
        daemons[name] = {
            "pid": pid,
            "alive": up_,
            "state": "up" if up_ else "down",
            "rss_bytes": rss_bytes(pid) if up_ else None,
            "log": str(table[name].log if name in table else layout.logfile(name)),
        }
    ceph_health, checks = None, {}
    if daemons.get(MON, {}).get("alive"):
        h = ceph_json(layout, "health", timeout=5) or {}
        ceph_health = h.get("status")
        checks = {k: v.get("summary", {}).get("message") for k, v in h.get("checks", {}).items()}
        if ceph_health is None:
            checks["MON_UNRESPONSIVE"] = "mon.a runs but did not answer `ceph health` within 5 s"
    level = _LEVEL.get(ceph_health or "HEALTH_OK", 1) if ceph_health or not daemons else 2
    down_ = [n for n, d in daemons.items() if not d["alive"]]
    for name in down_:
        what = table[name].serves if name in table else "its service"
        checks[f"DAEMON_DOWN {name}"] = (
            f"{name} is not running (last pid {daemons[name]['pid']}; log {daemons[name]['log']}): "
            f"{what}; `iobench lab restart {_short(name)} --dir {layout.dir}`"
        )
        level = max(level, 1 if name == MGR else 2)
    if "MON_UNRESPONSIVE" in checks:
        level = 2
    if meta.get("mount") and FUSE in daemons and daemons[FUSE]["alive"] and not mounted(layout.mnt):
        checks["MOUNT_GONE"] = f"ceph-fuse runs but {layout.mnt} is not mounted"
        level = max(level, 2)
    health = None if not daemons else ("HEALTH_OK", "HEALTH_WARN", "HEALTH_ERR")[level]
    objectstore = meta.get("objectstore")
    return {
        "dir": str(layout.dir),
        "running": any(d["alive"] for d in daemons.values()),
        "complete": bool(daemons) and not down_,
        "daemons": daemons,
        "health": health,
        "ceph_health": ceph_health,
        "health_checks": checks,
        "endpoint": meta.get("endpoint"),
        "conf": str(layout.conf),
        "env": str(layout.env) if layout.env.exists() else None,
        "mount": str(layout.mnt) if mounted(layout.mnt) else None,
        "ceph_version": meta.get("ceph_version"),
        "objectstore": objectstore,
        "keeps": STORE_KEEPS.get(objectstore or "", None),
        "fsid": meta.get("fsid"),
    }


def _short(name: str) -> str:
    return next((k for k, v in SHORT.items() if v == name), name)
