"""`iobench lab`: a real single-node Ceph (mon, OSD, radosgw, optional mgr and CephFS) on 127.0.0.1.

    info = up("~/.cache/iobench/lab")      # ~3 s on memstore; writes DIR/env (0600) and DIR/lab.json
    status(info.dir)                        # daemons alive, `ceph health`, endpoint
    down(info.dir, purge=True)              # stops only the processes this lab started, in order

After ``up``, ``. DIR/env`` gives boto3, s3fs, the ceph CLI and iobench the endpoint and keys.
Facts behind every choice: notes/ceph.md (feasibility run on the CI machine type).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from typing import Any

from .bringup import DEFAULT_MON_PORTS, DEFAULT_PORT, OBJECTSTORES, remove_entries, up
from .conf import FUSE, MON, LabInfo, Layout, default_lab_dir, lab_meta, read_env, resolve
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
from .restart import restart

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
    "main_lab",
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
    layout = Layout(resolve(lab_dir))
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
        # exit in 0.1 s. Nothing is lost that survives `down` anyway: `up` always starts afresh.
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


def purge(lab_dir: str | os.PathLike[str] | None = None) -> dict:
    return down(lab_dir, purge=True)


def _purge(layout: Layout) -> None:
    if mounted(layout.mnt):
        raise LabError(f"{layout.mnt} is still mounted: unmount it (umount {layout.mnt}) before purging")
    still = live_daemons(layout, lab_meta(layout).get("pids"))
    if still:
        raise LabError(f"daemons still running in {layout.dir}: {still}; not purging")
    remove_entries(layout)
    with contextlib.suppress(OSError):
        layout.dir.rmdir()  # only when nothing but the lab was in it


def status(lab_dir: str | os.PathLike[str] | None = None) -> dict:
    """Daemons (pid, alive, RSS), ``ceph health`` (when the mon runs), endpoint, mount."""
    layout = Layout(resolve(lab_dir))
    meta = lab_meta(layout)
    daemons = {}
    for name, pid in recorded_pids(layout, meta.get("pids")).items():
        up_ = owned(pid, layout.conf)
        daemons[name] = {"pid": pid, "alive": up_, "rss_bytes": rss_bytes(pid) if up_ else None}
    health, checks = None, {}
    if any(d["alive"] for n, d in daemons.items() if n == MON):
        h = ceph_json(layout, "health", timeout=10) or {}
        health, checks = (
            h.get("status"),
            {k: v.get("summary", {}).get("message") for k, v in h.get("checks", {}).items()},
        )
    return {
        "dir": str(layout.dir),
        "running": any(d["alive"] for d in daemons.values()),
        "daemons": daemons,
        "health": health,
        "health_checks": checks,
        "endpoint": meta.get("endpoint"),
        "conf": str(layout.conf),
        "env": str(layout.env) if layout.env.exists() else None,
        "mount": str(layout.mnt) if mounted(layout.mnt) else None,
        "ceph_version": meta.get("ceph_version"),
        "objectstore": meta.get("objectstore"),
    }


def main_lab(args: Any) -> int:
    """CLI entry: ``args.lab_cmd`` in up/down/status/purge, ``args.dir``, and for up ``args.port``,
    ``args.cephfs``, ``args.no_mgr``, ``args.objectstore``; ``args.purge`` for down, ``args.json``."""
    import sys

    cmd = args.lab_cmd
    lab_dir = getattr(args, "dir", None)
    try:
        if cmd == "up":
            info = up(
                lab_dir,
                port=getattr(args, "port", None) or DEFAULT_PORT,
                with_mgr=not getattr(args, "no_mgr", False),
                cephfs=getattr(args, "cephfs", False),
                objectstore=getattr(args, "objectstore", None) or "memstore",
                progress=lambda m: print(m, file=sys.stderr),
            )
            print(f". {info.env_file}")
            return 0
        if cmd in ("down", "purge"):
            res = down(lab_dir, purge=cmd == "purge" or getattr(args, "purge", False))
            print(
                json.dumps(res, indent=2)
                if getattr(args, "json", False)
                else f"stopped {', '.join(f'{n}: {h}' for n, h in res['stopped'].items()) or 'nothing'} "
                f"in {res['seconds']} s" + (", purged" if res["purged"] else "")
            )
            return 0
        if cmd == "status":
            st = status(lab_dir)
            if getattr(args, "json", False):
                print(json.dumps(st, indent=2))
            else:
                print(f"{st['dir']}: {st['health'] or 'not running'}  endpoint {st['endpoint']}")
                for name, d in st["daemons"].items():
                    rss = f"{d['rss_bytes'] / 2**20:.0f} MiB" if d["rss_bytes"] else ""
                    print(f"  {name:<14} pid {d['pid']:<8} {'up' if d['alive'] else 'down':<5} {rss}")
            return 0 if st["running"] else 3
    except LabError as e:
        print(f"iobench lab {cmd}: {e}", file=sys.stderr)
        return 2
    raise ValueError(f"unknown lab command {cmd!r}")
