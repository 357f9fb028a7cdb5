"""Restart one daemon of a running lab (fault-injection tests: radosgw or the OSD going away mid-epoch).

Stops exactly that daemon (pid file + cmdline check, as `down` does), starts it again with the same
ceph.conf and argv as `up`, and returns only once it serves again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from .bringup import _http_ready
from .conf import MDS, OSD, RGW, Layout, lab_meta, resolve
from .daemons import (
    LabError,
    ceph,
    ceph_json,
    failure,
    launch,
    live_daemons,
    recorded_pids,
    stop_all,
    wait_for,
)

__all__ = ["RESTARTABLE", "restart"]

# short name -> (daemon name, argv after the binary's `-c CONF`): the argv `up` starts them with.
RESTARTABLE: dict[str, tuple[str, list[str]]] = {
    "rgw": (RGW, ["radosgw", "-n", RGW]),
    "osd": (OSD, ["ceph-osd", "-i", "0"]),
    "mds": (MDS, ["ceph-mds", "-i", "a"]),
}


def osd_up(layout: Layout) -> bool:
    dump = ceph_json(layout, "osd", "dump", timeout=10) or {}
    return any(o.get("osd") == 0 and o.get("up") for o in dump.get("osds", []))


def mds_active(layout: Layout) -> bool:
    dump = ceph_json(layout, "fs", "dump", timeout=10) or {}
    return any(
        i.get("state") == "up:active"
        for fs in dump.get("filesystems", [])
        for i in fs.get("mdsmap", {}).get("info", {}).values()
    )


def _serving(layout: Layout, daemon: str) -> tuple[str, Callable[[], bool]]:
    if daemon == "rgw":
        endpoint = lab_meta(layout).get("endpoint")
        if not endpoint:
            raise LabError(f"{layout.lab_json} has no endpoint: is this a lab made by `iobench lab up`?")
        return f"radosgw serving {endpoint}", lambda: _http_ready(endpoint + "/")
    if daemon == "osd":
        return "osd.0 up", lambda: osd_up(layout)
    return "an active MDS", lambda: mds_active(layout)


def restart(lab_dir: str | os.PathLike[str], daemon: str, *, timeout: float = 120.0) -> None:
    """Stop the lab's ``daemon`` ("rgw", "osd" or "mds") and start it again; return once it serves.

    Raises LabError (naming the log to read) when the daemon is not running in this lab, or does not
    come back within ``timeout`` seconds.
    """
    if daemon not in RESTARTABLE:
        raise ValueError(f"daemon {daemon!r}: restartable daemons are {', '.join(RESTARTABLE)}")
    layout = Layout(resolve(lab_dir))
    name, argv = RESTARTABLE[daemon]
    meta = lab_meta(layout)
    live = live_daemons(layout, meta.get("pids"))
    if name not in live:
        known = recorded_pids(layout, meta.get("pids"))
        raise LabError(
            f"{name} is not running in {layout.dir} (recorded pid {known.get(name)}); "
            f"nothing to restart. `iobench lab status --dir {layout.dir}` shows what runs"
        )
    what, check = _serving(layout, daemon)
    if daemon == "osd":
        # Pacific's osd_fast_shutdown (default true) exits without unmounting the object store;
        # memstore saves its objects only on unmount, so a fast stop loses every object (measured:
        # the restarted OSD booted empty and radosgw never initialised). A full stop keeps them.
        r = ceph(layout, "daemon", str(layout.asok(name)), "config", "set", "osd_fast_shutdown", "false")
        if r.returncode:
            raise failure(layout, name, f"could not turn off osd_fast_shutdown: {r.stderr.strip()}")
    stop_all(layout, {name: live[name]})
    if daemon == "mds":
        # The stopped MDS may still hold rank 0 in the mds map until its beacon grace (15 s)
        # runs out; failing it hands the rank to the restarted daemon at once.
        ceph(layout, "mds", "fail", "a", timeout=10)
    if daemon == "osd":
        # Wait until the mon has marked the OSD down, or "osd.0 up" below would see the old state.
        deadline = time.monotonic() + 30
        while osd_up(layout) and time.monotonic() < deadline:
            time.sleep(0.1)
    pid = launch(layout, name, [argv[0], "-c", str(layout.conf), *argv[1:]])
    wait_for(check, what=what, timeout=timeout, layout=layout, daemon=name, pid=pid)
    if meta:  # keep lab.json's pids current: `down` falls back to them when a pid file is gone
        meta.setdefault("pids", {})[name] = pid
        tmp = layout.lab_json.with_name(f".{layout.lab_json.name}.tmp")
        tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
        os.replace(tmp, layout.lab_json)
