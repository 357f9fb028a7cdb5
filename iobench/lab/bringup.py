"""`iobench lab up`: create the lab's files and start its daemons in the measured order.

mon (0.5 s) -> mgr in the background -> OSD (mkfs, up at ~1.5 s) -> radosgw (serving at ~2.5 s)
[-> MDS + `ceph fs new` + ceph-fuse] -> S3 user with fresh random keys -> DIR/env, DIR/lab.json.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict

from .conf import (
    ENTRIES,
    FUSE,
    MDS,
    MGR,
    MON,
    OSD,
    RGW,
    STORE_KEEPS,
    LabInfo,
    Layout,
    asok_too_long,
    env_vars,
    lab_meta,
    render_conf,
    render_env,
    render_keyring,
    resolve,
    s3_keys,
    write_private,
)
from .daemons import (
    CephMissingError,
    LabError,
    ceph,
    ceph_json,
    ceph_ok,
    clean_env,
    daemon_argv,
    detach,
    failure,
    http_ready,
    install_hint,
    launch,
    live_daemons,
    mounted,
    port_free,
    recorded_pids,
    stop_all,
    unmount,
    wait_for,
)

DEFAULT_PORT = 7480
DEFAULT_MON_PORTS = (3300, 6789)
OBJECTSTORES = ("memstore", "bluestore")


def _missing_binaries(with_mgr: bool, cephfs: bool) -> list[str]:
    need = ["ceph", "ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool"]
    need += ["ceph-mgr"] * with_mgr + ["ceph-mds", "ceph-fuse"] * cephfs
    return [b for b in need if shutil.which(b) is None]


def _fuse_usable() -> str | None:
    """None when ceph-fuse can mount here, else why not."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if os.geteuid() != 0 and not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "mounting as non-root needs fusermount (apt package fuse3)"
    return None


def up(
    lab_dir: str | os.PathLike[str] | None = None,
    *,
    port: int | None = None,
    mon_ports: tuple[int, int] | None = None,
    with_mgr: bool | None = None,
    objectstore: str | None = None,
    memstore_bytes: int = 4 << 30,
    bluestore_bytes: int = 20 << 30,
    cephfs: bool | None = None,
    auth: str = "cephx",
    timeout: float = 120.0,
    progress: Callable[[str], None] | None = None,
) -> LabInfo:
    """Bring a lab up in ``lab_dir``; on any failure stop exactly what this call started, then raise.

    A directory that holds a lab (made by an earlier `up`, stopped by `down` without ``--purge``)
    gets the same cluster back: its fsid, ports, pools, buckets, S3 keys and CephFS files, with
    what its object store kept (conf.STORE_KEEPS). Options given here that differ from that lab's
    are reported and ignored (purge the lab to make another). Defaults for a new lab: port 7480,
    mon ports 3300/6789, a mgr, memstore, no CephFS.
    """
    say = progress or (lambda _msg: None)
    layout = Layout(resolve(lab_dir))
    refuse_live(layout)
    meta = existing_lab(layout)
    if meta is not None:
        asked = {
            "port": (port, meta.get("ports", {}).get("s3")),
            "mon_ports": (
                tuple(mon_ports) if mon_ports else None,
                (meta.get("ports", {}).get("mon_v2"), meta.get("ports", {}).get("mon_v1")),
            ),
            "with_mgr": (with_mgr, meta.get("with_mgr")),
            "objectstore": (objectstore, meta.get("objectstore")),
            "cephfs": (cephfs, meta.get("cephfs")),
        }
        for key, (given, kept) in asked.items():
            if given is not None and given != kept:
                say(
                    f"warning: the lab in {layout.dir} has {key}={kept}; {key}={given} is ignored "
                    f"(`iobench lab down --purge --dir {layout.dir}` first to make a new one)"
                )
        return _bring_back(layout, meta, say, timeout)
    port = DEFAULT_PORT if port is None else port
    mon_ports = DEFAULT_MON_PORTS if mon_ports is None else mon_ports
    with_mgr = True if with_mgr is None else with_mgr
    objectstore = objectstore or "memstore"
    cephfs = bool(cephfs)
    if objectstore not in OBJECTSTORES:
        raise ValueError(f"objectstore must be one of {OBJECTSTORES}, not {objectstore!r}")
    if auth not in ("cephx", "none"):
        raise ValueError(f"auth must be 'cephx' or 'none', not {auth!r}")
    missing = _missing_binaries(with_mgr, cephfs)
    if missing:
        raise CephMissingError(
            f"Ceph is not installed (missing {', '.join(missing)}). Install it with:\n"
            f"  {install_hint(cephfs)}" + ("" if cephfs else f"\n(add {'ceph-mds ceph-fuse'} for --cephfs)")
        )
    if warning := asok_too_long(layout):
        say(f"warning: {warning}")
    if layout.dir.exists() and any(layout.dir.iterdir()) and not layout.looks_like_lab():
        raise LabError(
            f"{layout.dir} is not empty and holds no lab (no ceph.conf/lab.json): choose another --dir"
        )
    names = {"s3": port, "mon v2": mon_ports[0], "mon v1": mon_ports[1]}
    if len(set(names.values())) != 3:
        raise LabError(f"the S3 and mon ports must differ: {names}")
    taken = [f"{what} port {p}" for what, p in names.items() if not port_free(p)]
    if taken:
        raise LabError(f"127.0.0.1: {', '.join(taken)} already in use; choose others (--port, mon_ports=...)")
    remove_entries(layout)
    for sub in (
        ("run", "log", "crash", MON, OSD, RGW) + ((MGR,) if with_mgr else ()) + ((MDS,) if cephfs else ())
    ):
        (layout.dir / sub).mkdir(parents=True, exist_ok=True)

    t0 = time.monotonic()
    started: dict[str, int] = {}
    try:
        info = _bring_up(
            layout,
            started,
            say,
            t0,
            port=port,
            mon_ports=mon_ports,
            with_mgr=with_mgr,
            objectstore=objectstore,
            memstore_bytes=memstore_bytes,
            bluestore_bytes=bluestore_bytes,
            cephfs=cephfs,
            auth=auth,
            timeout=timeout,
        )
    except BaseException:
        say("bring-up failed: stopping what it started")
        if mounted(layout.mnt):
            unmount(layout.mnt)
        stop_all(layout, live_daemons(layout, started))
        raise
    say(f"lab ready in {info.up_seconds:.1f} s: S3 {info.endpoint}, conf {layout.conf}; . {layout.env}")
    say(f"object store: {STORE_KEEPS[objectstore]}")
    return info


def existing_lab(layout: Layout) -> dict | None:
    """lab.json of a complete lab in ``layout`` (an earlier `up` finished there), else None."""
    meta = lab_meta(layout)
    if not meta.get("fsid") or not meta.get("ports"):
        return None  # none, or a bring-up that failed half-way: `up` makes a new one
    if not (layout.conf.exists() and layout.keyring.exists() and layout.env.exists()):
        return None
    if not (layout.dir / MON).is_dir() or not (layout.dir / OSD).is_dir():
        return None
    return meta


def _bring_back(layout: Layout, meta: dict, say: Callable[[str], None], timeout: float) -> LabInfo:
    """Start the daemons of the lab in ``layout`` again, in `up`'s order: the same cluster."""
    from .restart import serving_check, start_daemon

    ports = meta["ports"]
    taken = [f"{what} port {p}" for what, p in ports.items() if not port_free(p)]
    if taken:
        raise LabError(
            f"cannot bring the lab in {layout.dir} back: 127.0.0.1 {', '.join(taken)} already in use "
            "(another lab or program holds it); stop that, or purge this lab and make a new one"
        )
    detach(layout.mnt)  # a mount whose ceph-fuse died: detach it before mounting again
    order = [MON, *([MGR] if meta.get("with_mgr") else []), OSD, RGW]
    if meta.get("cephfs"):
        order.append(MDS)
        if meta.get("mount") and _fuse_usable() is None:
            order.append(FUSE)
    t0 = time.monotonic()
    started: dict[str, int] = {}
    try:
        for name in order:
            # the mgr comes up in the background, as in a new lab; it is awaited last
            started[name] = start_daemon(layout, name, timeout=timeout, wait=name != MGR)
            say(f"{name} up ({time.monotonic() - t0:.1f} s)")
        if MGR in started:
            what, check = serving_check(layout, MGR)
            wait_for(check, what=what, timeout=timeout, layout=layout, daemon=MGR, pid=started[MGR])
    except BaseException:
        say("bringing the lab back failed: stopping what it started")
        if mounted(layout.mnt):
            unmount(layout.mnt)
        stop_all(layout, live_daemons(layout, started))
        raise
    meta = lab_meta(layout)
    meta["pids"] = {**meta.get("pids", {}), **started}
    meta["up_seconds"] = round(time.monotonic() - t0, 2)
    meta["restarted_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    layout.lab_json.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    info = LabInfo.load(layout.dir)
    say(
        f"lab back in {info.up_seconds:.1f} s: the same cluster (fsid {meta['fsid']}), S3 {info.endpoint}; "
        f". {layout.env}"
    )
    say(f"object store: {STORE_KEEPS.get(info.objectstore, info.objectstore)}")
    return info


def _bring_up(
    layout: Layout,
    started: dict[str, int],
    say,
    t0: float,
    *,
    port,
    mon_ports,
    with_mgr,
    objectstore,
    memstore_bytes,
    bluestore_bytes,
    cephfs,
    auth,
    timeout,
) -> LabInfo:
    conf = str(layout.conf)
    fsid = str(uuid.uuid4())
    write_private(layout.keyring, render_keyring())
    layout.conf.write_text(
        render_conf(
            layout,
            fsid=fsid,
            port=port,
            mon_ports=mon_ports,
            auth=auth,
            objectstore=objectstore,
            memstore_bytes=memstore_bytes,
            bluestore_bytes=bluestore_bytes,
            with_mgr=with_mgr,
        )
    )
    mlog = layout.log / "mkfs.log"
    addrs = f"[v2:127.0.0.1:{mon_ports[0]},v1:127.0.0.1:{mon_ports[1]}]"
    for daemon, argv in (
        (MON, ["monmaptool", "--create", "--fsid", fsid, "--addv", "a", addrs, str(layout.monmap)]),
        (
            MON,
            [
                "ceph-mon",
                "-c",
                conf,
                "-i",
                "a",
                "--mkfs",
                "--monmap",
                str(layout.monmap),
                "--keyring",
                str(layout.keyring),
            ],
        ),
    ):
        with open(mlog, "ab") as out:
            if subprocess.run(argv, stdout=out, stderr=out, env=clean_env(), timeout=60).returncode:
                raise failure(layout, daemon, f"`{' '.join(argv)}` failed", [mlog])

    started[MON] = launch(layout, MON, daemon_argv(layout, MON))
    wait_for(
        lambda: ceph(layout, "mon", "stat", timeout=10).returncode == 0,
        what="mon quorum",
        timeout=timeout,
        layout=layout,
        daemon=MON,
        pid=started[MON],
    )
    say(f"mon up ({time.monotonic() - t0:.1f} s)")
    if with_mgr:  # starts while the OSD is being made
        started[MGR] = launch(layout, MGR, daemon_argv(layout, MGR))

    osd_uuid = str(uuid.uuid4())
    ceph_ok(layout, MON, "osd", "new", osd_uuid, "0")
    osd_mkfs = layout.log / "osd.0.mkfs.log"
    with open(osd_mkfs, "ab") as out:  # -d: without it a mkfs error reaches neither terminal nor log
        argv = ["ceph-osd", "-c", conf, "-i", "0", "--mkfs", "--osd-uuid", osd_uuid, "-d"]
        if subprocess.run(argv, stdout=out, stderr=out, env=clean_env(), timeout=300).returncode:
            raise failure(layout, OSD, "`ceph-osd --mkfs` failed", [osd_mkfs])
    started[OSD] = launch(layout, OSD, daemon_argv(layout, OSD))

    def osd_up() -> bool:
        dump = ceph_json(layout, "osd", "dump", timeout=10) or {}
        return any(o.get("osd") == 0 and o.get("up") for o in dump.get("osds", []))

    wait_for(osd_up, what="osd.0 up", timeout=timeout, layout=layout, daemon=OSD, pid=started[OSD])
    say(f"osd up ({time.monotonic() - t0:.1f} s)")

    started[RGW] = launch(layout, RGW, daemon_argv(layout, RGW))
    if cephfs:  # overlaps with radosgw creating its pools
        started[MDS] = launch(layout, MDS, daemon_argv(layout, MDS))
        for pool in ("cephfs_metadata", "cephfs_data"):
            ceph_ok(layout, MDS, "osd", "pool", "create", pool, "8")
        ceph_ok(layout, MDS, "fs", "new", "cephfs", "cephfs_metadata", "cephfs_data")
        ceph_ok(layout, MDS, "fs", "set", "cephfs", "standby_count_wanted", "0")  # one MDS: no WARN
    endpoint = f"http://127.0.0.1:{port}"
    wait_for(
        lambda: http_ready(endpoint + "/"),
        what=f"radosgw serving {endpoint}",
        timeout=timeout,
        layout=layout,
        daemon=RGW,
        pid=started[RGW],
    )
    say(f"rgw up ({time.monotonic() - t0:.1f} s)")

    access, secret = s3_keys()
    argv = [
        "radosgw-admin",
        "-c",
        conf,
        "-n",
        "client.admin",
        "user",
        "create",
        "--uid=iobench",
        "--display-name=iobench lab",
        f"--access-key={access}",
        f"--secret-key={secret}",
    ]
    r = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=60)
    if r.returncode:
        raise failure(layout, RGW, f"radosgw-admin user create failed: {r.stderr.strip()[-500:]}")

    mount, mount_note = None, None
    if cephfs:

        def mds_active() -> bool:
            dump = ceph_json(layout, "fs", "dump", timeout=10) or {}
            return any(
                i.get("state") == "up:active"
                for fs in dump.get("filesystems", [])
                for i in fs.get("mdsmap", {}).get("info", {}).values()
            )

        wait_for(
            mds_active, what="an active MDS", timeout=timeout, layout=layout, daemon=MDS, pid=started[MDS]
        )
        mount_note = _fuse_usable()
        if mount_note is None:
            layout.mnt.mkdir(exist_ok=True)
            started[FUSE] = launch(layout, FUSE, daemon_argv(layout, FUSE))
            wait_for(
                lambda: mounted(layout.mnt),
                what=f"the mount on {layout.mnt}",
                timeout=30,
                layout=layout,
                daemon=FUSE,
                pid=started[FUSE],
            )
            mount = layout.mnt
            say(f"cephfs mounted on {mount} ({time.monotonic() - t0:.1f} s)")
        else:
            say(f"cephfs is up but not mounted: {mount_note}")

    if with_mgr:
        wait_for(
            lambda: bool((ceph_json(layout, "mgr", "stat", timeout=10) or {}).get("available")),
            what="mgr available",
            timeout=timeout,
            layout=layout,
            daemon=MGR,
            pid=started[MGR],
        )

    write_private(
        layout.env,
        render_env(env_vars(conf=layout.conf, endpoint=endpoint, access_key=access, secret_key=secret)),
    )
    ver = subprocess.run(["ceph-mon", "--version"], capture_output=True, text=True).stdout.split()
    info = LabInfo(
        dir=layout.dir,
        conf=layout.conf,
        env_file=layout.env,
        endpoint=endpoint,
        access_key=access,
        secret_key=secret,
        pids=dict(started),
        ports={"s3": port, "mon_v2": mon_ports[0], "mon_v1": mon_ports[1]},
        objectstore=objectstore,
        mount=mount,
        ceph_version=ver[2] if len(ver) > 2 else "unknown",
        up_seconds=round(time.monotonic() - t0, 2),
    )
    meta = {k: v for k, v in asdict(info).items() if k != "secret_key"}
    meta.update(
        started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        fsid=fsid,
        auth=auth,
        with_mgr=with_mgr,
        cephfs=cephfs,
        mount_note=mount_note,
        memstore_bytes=memstore_bytes if objectstore == "memstore" else None,
    )
    layout.lab_json.write_text(json.dumps(meta, indent=2, default=str) + "\n")
    return info


def refuse_live(layout: Layout) -> None:
    meta = lab_meta(layout)
    recorded = recorded_pids(layout, meta.get("pids"))
    live = live_daemons(layout, meta.get("pids"))
    if not live:
        return
    running = ", ".join(f"{n} (pid {p})" for n, p in live.items())
    dead = sorted(set(recorded) - set(live))
    if dead and meta.get("fsid"):
        raise LabError(
            f"the lab in {layout.dir} is partly running: {running}; not running: {', '.join(dead)}. "
            f"Start what is down with `iobench lab restart DAEMON --dir {layout.dir}` (or restart all)."
        )
    raise LabError(
        f"a lab is already running in {layout.dir}: {running}. "
        f"Stop it first with `iobench lab down --dir {layout.dir}`, or use another --dir and ports."
    )


def remove_entries(layout: Layout) -> None:
    for name in ENTRIES:
        path = layout.dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
