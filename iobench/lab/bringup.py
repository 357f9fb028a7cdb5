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
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TypedDict, cast

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
    LabPaths,
    LabSettings,
    asok_too_long,
    env_vars,
    lab_meta,
    lab_paths,
    render_conf,
    render_env,
    render_keyring,
    s3_keys,
    write_private,
)
from .daemons import (
    CephMissingError,
    LabError,
    ceph_ok,
    clean_env,
    detach,
    failure,
    install_hint,
    launch,
    live_daemons,
    mounted,
    port_free,
    recorded_pids,
    stop_all,
    unmount,
)
from .daemontable import daemon_table


class _Asked(TypedDict, total=False):
    """The options a caller of `up` gave; the rest are LabSettings' defaults, or the existing lab's."""

    port: int
    mon_ports: tuple[int, int]
    with_mgr: bool
    objectstore: str
    cephfs: bool


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
    layout = lab_paths(lab_dir)
    refuse_live(layout)
    # what the caller chose; the rest is LabSettings' defaults, or the existing lab's
    asked: _Asked = {}
    if port is not None:
        asked["port"] = port
    if mon_ports:
        # a list from a caller becomes the pair the signature promises, as LabSettings holds it
        asked["mon_ports"] = cast("tuple[int, int]", tuple(mon_ports))
    if with_mgr is not None:
        asked["with_mgr"] = with_mgr
    if objectstore:
        asked["objectstore"] = objectstore
    if cephfs is not None:
        asked["cephfs"] = cephfs
    meta = existing_lab(layout)
    if meta is not None:
        _warn_ignored(layout, meta, asked, say)
        return _bring_back(layout, meta, say, timeout)
    settings = LabSettings(**asked, memstore_bytes=memstore_bytes, bluestore_bytes=bluestore_bytes, auth=auth)
    missing = _missing_binaries(settings.with_mgr, settings.cephfs)
    if missing:
        raise CephMissingError(
            f"Ceph is not installed (missing {', '.join(missing)}). Install it with:\n"
            f"  {install_hint(settings.cephfs)}"
            + ("" if settings.cephfs else f"\n(add {'ceph-mds ceph-fuse'} for --cephfs)")
        )
    if warning := asok_too_long(layout):
        say(f"warning: {warning}")
    if layout.dir.exists() and any(layout.dir.iterdir()) and not layout.looks_like_lab():
        raise LabError(
            f"{layout.dir} is not empty and holds no lab (no ceph.conf/lab.json): choose another --dir"
        )
    names = {"s3": settings.port, "mon v2": settings.mon_ports[0], "mon v1": settings.mon_ports[1]}
    if len(set(names.values())) != 3:
        raise LabError(f"the S3 and mon ports must differ: {names}")
    taken = [f"{what} port {p}" for what, p in names.items() if not port_free(p)]
    if taken:
        raise LabError(f"127.0.0.1: {', '.join(taken)} already in use; choose others (--port, mon_ports=...)")
    remove_entries(layout)
    subs = ("run", "log", "crash", MON, OSD, RGW) + ((MGR,) if settings.with_mgr else ())
    for sub in subs + ((MDS,) if settings.cephfs else ()):
        (layout.dir / sub).mkdir(parents=True, exist_ok=True)

    bring_up = _BringUp(layout, settings, say, timeout)
    try:
        info = bring_up.run()
    except BaseException:
        say("bring-up failed: stopping what it started")
        _stop_started(layout, bring_up.started)
        raise
    say(f"lab ready in {info.up_seconds:.1f} s: S3 {info.endpoint}, conf {layout.conf}; . {layout.env}")
    say(f"object store: {STORE_KEEPS[settings.objectstore]}")
    return info


def _stop_started(layout: LabPaths, started: dict[str, int]) -> None:
    if mounted(layout.mnt):
        unmount(layout.mnt)
    stop_all(layout, live_daemons(layout, started))


def _warn_ignored(
    layout: LabPaths, meta: dict, asked: Mapping[str, object], say: Callable[[str], None]
) -> None:
    """Options given for a directory that holds a lab already, which differ from that lab's."""
    ports = meta.get("ports", {})
    kept = {
        "port": ports.get("s3"),
        "mon_ports": (ports.get("mon_v2"), ports.get("mon_v1")),
        "with_mgr": meta.get("with_mgr"),
        "objectstore": meta.get("objectstore"),
        "cephfs": meta.get("cephfs"),
    }
    for key, given in asked.items():
        if given != kept[key]:
            say(
                f"warning: the lab in {layout.dir} has {key}={kept[key]}; {key}={given} is ignored "
                f"(`iobench lab down --purge --dir {layout.dir}` first to make a new one)"
            )


def existing_lab(layout: LabPaths) -> dict | None:
    """lab.json of a complete lab in ``layout`` (an earlier `up` finished there), else None."""
    meta = lab_meta(layout)
    if not meta.get("fsid") or not meta.get("ports"):
        return None  # none, or a bring-up that failed half-way: `up` makes a new one
    if not (layout.conf.exists() and layout.keyring.exists() and layout.env.exists()):
        return None
    if not (layout.dir / MON).is_dir() or not (layout.dir / OSD).is_dir():
        return None
    return meta


def _bring_back(layout: LabPaths, meta: dict, say: Callable[[str], None], timeout: float) -> LabInfo:
    """Start the daemons of the lab in ``layout`` again, in `up`'s order: the same cluster."""
    from .restart import start_daemon

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
            daemon_table(layout, meta.get("endpoint"))[MGR].await_serving(layout, started[MGR], timeout)
    except BaseException:
        say("bringing the lab back failed: stopping what it started")
        _stop_started(layout, started)
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


class _BringUp:
    """One `up` of a new lab, step by step. ``started`` holds what it has started, so that the
    caller can stop exactly that when a step fails."""

    def __init__(
        self, layout: LabPaths, settings: LabSettings, say: Callable[[str], None], timeout: float
    ) -> None:
        self.layout, self.settings, self.say, self.timeout = layout, settings, say, timeout
        self.daemons = daemon_table(layout, settings.endpoint)
        self.started: dict[str, int] = {}
        self.t0 = time.monotonic()

    def run(self) -> LabInfo:
        fsid = str(uuid.uuid4())
        write_private(self.layout.keyring, render_keyring())
        self.layout.conf.write_text(render_conf(self.layout, fsid, self.settings))
        self._make_mon(fsid)
        self._start(MON, "mon")
        if self.settings.with_mgr:  # starts while the OSD is being made; awaited last
            self._launch(MGR)
        self._make_osd()
        self._start(OSD, "osd")
        self._launch(RGW)
        if self.settings.cephfs:  # overlaps with radosgw creating its pools
            self._launch(MDS)
            self._make_fs()
        self._await(RGW, "rgw")
        access, secret = self._make_s3_user()
        mount, mount_note = self._mount() if self.settings.cephfs else (None, None)
        if self.settings.with_mgr:
            self._await(MGR)
        write_private(
            self.layout.env,
            render_env(
                env_vars(
                    conf=self.layout.conf,
                    endpoint=self.settings.endpoint,
                    access_key=access,
                    secret_key=secret,
                )
            ),
        )
        return self._record(fsid, access, secret, mount, mount_note)

    def _launch(self, name: str) -> None:
        self.started[name] = launch(self.layout, name, self.daemons[name].argv)

    def _await(self, name: str, said: str | None = None) -> None:
        self.daemons[name].await_serving(self.layout, self.started[name], self.timeout)
        if said:
            self.say(f"{said} up ({time.monotonic() - self.t0:.1f} s)")

    def _start(self, name: str, said: str) -> None:
        self._launch(name)
        self._await(name, said)

    def _make_mon(self, fsid: str) -> None:
        layout, mon_ports = self.layout, self.settings.mon_ports
        mlog = layout.log / "mkfs.log"
        addrs = f"[v2:127.0.0.1:{mon_ports[0]},v1:127.0.0.1:{mon_ports[1]}]"
        monmap, keyring = str(layout.monmap), str(layout.keyring)
        for argv in (
            ["monmaptool", "--create", "--fsid", fsid, "--addv", "a", addrs, monmap],
            [
                "ceph-mon",
                "-c",
                str(layout.conf),
                "-i",
                "a",
                "--mkfs",
                "--monmap",
                monmap,
                "--keyring",
                keyring,
            ],
        ):
            with open(mlog, "ab") as out:
                if subprocess.run(argv, stdout=out, stderr=out, env=clean_env(), timeout=60).returncode:
                    raise failure(layout, MON, f"`{' '.join(argv)}` failed", [mlog])

    def _make_osd(self) -> None:
        osd_uuid = str(uuid.uuid4())
        ceph_ok(self.layout, MON, "osd", "new", osd_uuid, "0")
        osd_mkfs = self.layout.log / "osd.0.mkfs.log"
        with open(osd_mkfs, "ab") as out:  # -d: without it a mkfs error reaches neither terminal nor log
            argv = [
                "ceph-osd",
                "-c",
                str(self.layout.conf),
                "-i",
                "0",
                "--mkfs",
                "--osd-uuid",
                osd_uuid,
                "-d",
            ]
            if subprocess.run(argv, stdout=out, stderr=out, env=clean_env(), timeout=300).returncode:
                raise failure(self.layout, OSD, "`ceph-osd --mkfs` failed", [osd_mkfs])

    def _make_fs(self) -> None:
        for pool in ("cephfs_metadata", "cephfs_data"):
            ceph_ok(self.layout, MDS, "osd", "pool", "create", pool, "8")
        ceph_ok(self.layout, MDS, "fs", "new", "cephfs", "cephfs_metadata", "cephfs_data")
        ceph_ok(self.layout, MDS, "fs", "set", "cephfs", "standby_count_wanted", "0")  # one MDS: no WARN

    def _make_s3_user(self) -> tuple[str, str]:
        access, secret = s3_keys()
        argv = ["radosgw-admin", "-c", str(self.layout.conf), "-n", "client.admin", "user", "create"]
        argv += [
            "--uid=iobench",
            "--display-name=iobench lab",
            f"--access-key={access}",
            f"--secret-key={secret}",
        ]
        r = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=60)
        if r.returncode:
            raise failure(self.layout, RGW, f"radosgw-admin user create failed: {r.stderr.strip()[-500:]}")
        return access, secret

    def _mount(self) -> tuple[Path | None, str | None]:
        """(the CephFS mount, or None and why not) once the MDS is active."""
        self._await(MDS)
        why_not = _fuse_usable()
        if why_not is not None:
            self.say(f"cephfs is up but not mounted: {why_not}")
            return None, why_not
        self.layout.mnt.mkdir(exist_ok=True)
        self._launch(FUSE)
        self._await(FUSE)
        self.say(f"cephfs mounted on {self.layout.mnt} ({time.monotonic() - self.t0:.1f} s)")
        return self.layout.mnt, None

    def _record(
        self, fsid: str, access: str, secret: str, mount: Path | None, mount_note: str | None
    ) -> LabInfo:
        """lab.json, written last: a lab without it is a bring-up that did not finish."""
        settings = self.settings
        ver = subprocess.run(["ceph-mon", "--version"], capture_output=True, text=True).stdout.split()
        info = LabInfo(
            dir=self.layout.dir,
            conf=self.layout.conf,
            env_file=self.layout.env,
            endpoint=settings.endpoint,
            access_key=access,
            secret_key=secret,
            pids=dict(self.started),
            ports=settings.ports,
            objectstore=settings.objectstore,
            mount=mount,
            ceph_version=ver[2] if len(ver) > 2 else "unknown",
            up_seconds=round(time.monotonic() - self.t0, 2),
        )
        meta = {k: v for k, v in asdict(info).items() if k != "secret_key"}
        meta.update(
            started_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            fsid=fsid,
            auth=settings.auth,
            with_mgr=settings.with_mgr,
            cephfs=settings.cephfs,
            mount_note=mount_note,
            memstore_bytes=settings.memstore_bytes if settings.objectstore == "memstore" else None,
        )
        self.layout.lab_json.write_text(json.dumps(meta, indent=2, default=str) + "\n")
        return info


def refuse_live(layout: LabPaths) -> None:
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


def remove_entries(layout: LabPaths) -> None:
    for name in ENTRIES:
        path = layout.dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
