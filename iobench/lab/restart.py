"""Break and mend a lab: start, stop and restart its daemons one by one, keeping the cluster.

    restart(DIR, "osd")     # stop osd.0 if it runs (cleanly: memstore saves its objects), start it
    start_daemon(layout, "rgw")   # a daemon that died (kill -9) comes back with the argv `up` used

Every daemon is started with the same ceph.conf and argv as `up`, and a call returns only once the
daemon serves again (mon in quorum, OSD active, radosgw answering HTTP, MDS active, mount answering).
"""

from __future__ import annotations

import contextlib
import json
import os
import time

from .conf import FUSE, MDS, MGR, MON, OSD, SHORT, LabPaths, lab_meta, lab_paths
from .daemons import (
    LabError,
    ceph,
    ceph_json,
    detach,
    launch,
    live_daemons,
    recorded_pids,
    stop_all,
)
from .daemontable import daemon_table

__all__ = ["RESTARTABLE", "restart_daemon", "start_daemon", "stop_daemon"]

RESTARTABLE = tuple(SHORT)  # mon, mgr, osd, rgw, mds, fuse


def osd_up(layout: LabPaths) -> bool:
    """The mon's osdmap says osd.0 is up (after a kill -9 it keeps saying so for up to 15 min)."""
    dump = ceph_json(layout, "osd", "dump", timeout=10) or {}
    return any(o.get("osd") == 0 and o.get("up") for o in dump.get("osds", []))


def stop_daemon(layout: LabPaths, name: str, *, timeout: float = 15.0) -> str:
    """Stop ``name`` if it runs (how it ended: stopped, killed, not running); a FUSE mount is unmounted."""
    meta = lab_meta(layout)
    live = live_daemons(layout, meta.get("pids"))
    if name == FUSE:
        detach(layout.mnt)  # a dead or hung ceph-fuse too
        if name not in live:
            _evict_stale_sessions(layout)
    how = "not running"
    if name in live:
        if name == OSD:
            # Pacific's osd_fast_shutdown (default true) exits without unmounting the object store;
            # memstore saves its objects only on unmount, so a fast stop loses every object (measured:
            # the restarted OSD booted empty and radosgw never initialised). ceph.conf turns it off;
            # this covers a lab made before that line was there.
            ceph(layout, "daemon", str(layout.asok(name)), "config", "set", "osd_fast_shutdown", "false")
        how = stop_all(layout, {name: live[name]}, timeout=timeout)[name]
    if name == MDS and live.get(MON):
        # A stopped or killed MDS keeps rank 0 in the mds map until its beacon grace (15 s) runs
        # out, and a killed one for longer (measured: 50 s); failing it hands the rank over at once.
        ceph(layout, "mds", "fail", "a", timeout=10)
    return how


def _evict_stale_sessions(layout: LabPaths) -> list[int]:
    """Evict the MDS sessions of this lab's mount whose ceph-fuse is gone (killed: it released no
    caps). Left alone, the MDS keeps their caps until session_timeout (60 s), and the next client
    to open a file they held waits that long (measured: a read after `restart fuse` took 60 s)."""
    sessions = ceph_json(layout, "tell", MDS, "session", "ls", timeout=10)
    evicted = []
    for session in sessions if isinstance(sessions, list) else []:
        meta = session.get("client_metadata") or {}
        if meta.get("mount_point") == str(layout.mnt) and isinstance(session.get("id"), int):
            ceph(layout, "tell", MDS, "client", "evict", f"id={session['id']}", timeout=10)
            evicted.append(session["id"])
    return evicted


def start_daemon(layout: LabPaths, name: str, *, timeout: float = 120.0, wait: bool = True) -> int:
    """Start ``name`` with `up`'s argv; with ``wait``, return once it serves. Its pid."""
    daemon = daemon_table(layout, lab_meta(layout).get("endpoint"))[name]
    if name == FUSE:
        layout.mnt.mkdir(exist_ok=True)
    if name == OSD:
        # the old OSD may have left its admin socket: remove it so "active" is the new one's answer
        with contextlib.suppress(FileNotFoundError):
            layout.asok(OSD).unlink()
    for attempt in range(5):
        try:
            pid = launch(layout, name, daemon.argv)
            break
        except LabError as exc:
            # the killed predecessor's last threads may still hold its store's lock for a moment
            if attempt == 4 or not any(w in str(exc) for w in ("currently in use", "lock", "busy")):
                raise
            time.sleep(1.0)
    if name == MDS:
        # `lab down` fails the file system so that the MDS stops at once: let it join again
        ceph(layout, "fs", "set", "cephfs", "joinable", "true", timeout=10)
    _record_pid(layout, name, pid)
    if wait:
        daemon.await_serving(layout, pid, timeout)
    return pid


def _record_pid(layout: LabPaths, name: str, pid: int) -> None:
    """Keep lab.json's pids current: `down` falls back to them when a pid file is gone."""
    meta = lab_meta(layout)
    if not meta:
        return
    meta.setdefault("pids", {})[name] = pid
    tmp = layout.lab_json.with_name(f".{layout.lab_json.name}.tmp")
    tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    os.replace(tmp, layout.lab_json)


def restart_daemon(
    lab_dir: str | os.PathLike[str] | None,
    daemon: str,
    *,
    timeout: float = 120.0,
) -> dict:
    """Restart one daemon of the lab ("mon", "mgr", "osd", "rgw", "mds", "fuse"), keeping the cluster;
    a daemon that died (kill -9) is simply started. (``iobench.lab.restart`` also restarts all.)

    Returns {"restarted": {name: how the old one ended}, "seconds": s, "notes": [...]}. Raises
    LabError (naming the log to read) when the daemon does not come back within ``timeout`` s.
    """
    layout = lab_paths(lab_dir)
    meta = lab_meta(layout)
    if not meta.get("fsid"):
        raise LabError(
            f"{layout.dir} holds no lab made by `iobench lab up` (no lab.json): nothing to restart"
        )
    t0 = time.monotonic()
    if daemon not in RESTARTABLE:
        raise ValueError(f"daemon {daemon!r}: restartable daemons are {', '.join(RESTARTABLE)}")
    name = SHORT[daemon]
    known = recorded_pids(layout, meta.get("pids"))
    if name not in known and not _configured(meta, name):
        raise LabError(f"the lab in {layout.dir} has no {name} (made without it); nothing to restart")
    notes = []
    how = stop_daemon(layout, name, timeout=timeout)
    if how == "not running" and name == OSD and meta.get("objectstore") == "memstore":
        notes.append(
            "osd.0 (memstore) was not running: if it died rather than stopped, the objects written "
            "since its last clean stop are gone (memstore saves them only when it stops cleanly)"
        )
    if name == OSD and how != "not running":
        deadline = time.monotonic() + 30  # the mon marks it down on a clean stop; then it may boot
        while osd_up(layout) and time.monotonic() < deadline:
            time.sleep(0.1)
    start_daemon(layout, name, timeout=timeout)
    return {"restarted": {name: how}, "seconds": round(time.monotonic() - t0, 2), "notes": notes}


def _configured(meta: dict, name: str) -> bool:
    if name == MGR:
        return bool(meta.get("with_mgr"))
    if name in (MDS, FUSE):
        return bool(meta.get("cephfs")) and (name != FUSE or meta.get("mount") is not None)
    return True
