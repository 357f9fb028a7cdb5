"""Processes of one lab: start a daemon, find ours by pid file + cmdline, stop them in order.

A process is "ours" only when its pid comes from this lab's pid files (or lab.json) AND its
command line holds this lab's ceph.conf as an argument: a reused pid or a daemon of another lab
is never signalled. Nothing is ever looked up or killed by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .conf import FUSE, MDS, MGR, MON, OSD, RGW, LabPaths

APT_PACKAGES = "ceph-mon ceph-osd ceph-mgr radosgw python3-rados"
APT_CEPHFS = "ceph-mds ceph-fuse"


class LabError(RuntimeError):
    """`iobench lab` could not do what was asked; the message says why and what to read or do."""

    def __init__(self, message: str, *, daemon: str | None = None, log: Path | None = None):
        super().__init__(message)
        self.daemon = daemon
        self.log = log


class CephMissingError(LabError):
    """The Ceph binaries are not installed."""


def install_hint(cephfs: bool = False) -> str:
    pkgs = APT_PACKAGES + (f" {APT_CEPHFS}" if cephfs else "")
    return f"apt-get install -y --no-install-recommends {pkgs}"


def clean_env() -> dict[str, str]:
    # CEPH_ARGS holds CLI-only options (--connect-timeout) that make daemons refuse to start.
    return {k: v for k, v in os.environ.items() if k not in ("CEPH_ARGS",)}


# ------------------------------------------------------------------ processes


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie counts as gone (our init may not reap orphans), but only
    once its last thread has exited: a killed daemon's leader turns zombie while its other threads
    still exit, holding its files and locks (measured: a restarted OSD found bluestore's fsid lock
    still held, "(16) Device or resource busy")."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    if stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X"):
        return True
    try:
        return any(t != str(pid) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return False


def argv_of(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [os.fsdecode(a) for a in raw.split(b"\0") if a]


def owned(pid: int, conf: Path) -> bool:
    """``pid`` is alive and was started with ``conf`` as one of its arguments."""
    return alive(pid) and str(conf) in argv_of(pid)


def read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 1 else None


def recorded_pids(layout: LabPaths, extra: dict[str, int] | None = None) -> dict[str, int]:
    """name -> pid from run/*.pid, then ``extra`` (lab.json) for names whose pid file is gone."""
    pids = dict(extra or {})
    if layout.run.is_dir():
        for pf in sorted(layout.run.glob("*.pid")):
            pid = read_pid(pf)
            if pid is not None:
                pids[pf.name[: -len(".pid")]] = pid
    return pids


def live_daemons(layout: LabPaths, extra: dict[str, int] | None = None) -> dict[str, int]:
    return {n: p for n, p in recorded_pids(layout, extra).items() if owned(p, layout.conf)}


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def stop_order(names: Iterable[str]) -> list[list[str]]:
    """Groups stopped one after the other, as measured: ceph-fuse alone (stopped together with the MDS
    it hangs until SIGKILL); OSD clients (rgw, mds) next, or they hang 10-15 s on a gone OSD; then
    mgr + osd together; the mon last (an OSD whose mon is gone waits ~5 s).
    """
    names = list(names)
    groups = [
        [n for n in names if n == FUSE],  # its clean exit needs the MDS
        [n for n in names if n in (RGW, MDS) or n.startswith(("client.rgw.", "mds."))],
        [n for n in names if n in (MGR, OSD) or n.startswith(("mgr.", "osd."))],
        [n for n in names if n == MON or n.startswith("mon.")],
    ]
    placed = {n for g in groups for n in g}
    groups.append([n for n in names if n not in placed])
    return [g for g in groups if g]


def terminate(pids: dict[str, int], conf: Path, *, timeout: float = 15.0) -> dict[str, str]:
    """SIGTERM the owned ones together, wait up to ``timeout``, SIGKILL the rest: name -> how it ended."""
    how: dict[str, str] = {}
    targets = {}
    for name, pid in pids.items():
        if owned(pid, conf):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                targets[name] = pid
        else:
            how[name] = "not running"
    deadline = time.monotonic() + timeout
    while targets and time.monotonic() < deadline:
        for name, pid in list(targets.items()):
            if not alive(pid):
                how[name] = "stopped"
                del targets[name]
        time.sleep(0.05)
    for name, pid in targets.items():
        if owned(pid, conf):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            how[name] = "killed"
        else:
            how[name] = "stopped"
    end = time.monotonic() + 5
    while any(alive(p) for p in targets.values()) and time.monotonic() < end:
        time.sleep(0.05)
    return how


def stop_all(layout: LabPaths, pids: dict[str, int], *, timeout: float = 15.0) -> dict[str, str]:
    how: dict[str, str] = {}
    for group in stop_order(pids):
        how.update(terminate({n: pids[n] for n in group}, layout.conf, timeout=timeout))
    for name in pids:
        pf = layout.pidfile(name)
        if read_pid(pf) == pids[name] and not alive(pids[name]):
            pf.unlink(missing_ok=True)
    return how


# ------------------------------------------------------------------ starting and waiting


def tail(path: Path, lines: int = 20) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def failure(layout: LabPaths, daemon: str, what: str, logs: Iterable[Path] = ()) -> LabError:
    """An error naming the daemon and the log to read, with that log's last lines."""
    logs = [*logs, layout.logfile(daemon)]
    parts = [f"{daemon}: {what}"]
    main_log = None
    for path in logs:
        text = tail(path)
        if text.strip():
            main_log = main_log or path
            parts.append(f"--- last lines of {path}:\n{text}")
    main_log = main_log or layout.logfile(daemon)
    parts.insert(1, f"read {main_log}" + (f" (and {layout.log}/)" if len(logs) > 1 else ""))
    return LabError("\n".join(parts), daemon=daemon, log=main_log)


def wait_for(
    check: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    layout: LabPaths,
    daemon: str,
    pid: int | None = None,
) -> None:
    """Poll ``check`` until true; fail at once if ``pid`` exits, or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        if check():
            return
        if pid is not None and not alive(pid):
            raise failure(layout, daemon, f"exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise failure(layout, daemon, f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def launch(layout: LabPaths, name: str, argv: list[str], *, timeout: float = 60.0) -> int:
    """Run a self-daemonizing Ceph daemon; return the pid from its pid file."""
    pidfile = layout.pidfile(name)
    stale = read_pid(pidfile)
    if stale is not None and not owned(stale, layout.conf):
        # a killed daemon leaves its pid file: read before the new one writes its own, it would
        # name the dead process (and the wait below would report the new daemon as exited)
        pidfile.unlink(missing_ok=True)
    errlog = layout.log / f"{name}.stderr.log"
    # files, not pipes: the daemonized child may keep its inherited stdio open
    with open(errlog, "ab") as err:
        try:
            rc = subprocess.run(
                argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=clean_env(), timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            raise failure(
                layout, name, f"`{argv[0]}` did not daemonize within {timeout:.0f} s", [errlog]
            ) from None
    if rc != 0:
        raise failure(layout, name, f"`{' '.join(argv)}` exited with status {rc}", [errlog])
    found: list[int] = []

    def has_pid() -> bool:
        pid = read_pid(pidfile)
        if pid is not None:
            found.append(pid)
        return pid is not None

    wait_for(has_pid, what=f"its pid file {pidfile}", timeout=15, layout=layout, daemon=name)
    return found[-1]


def http_ready(url: str) -> bool:
    """Something answers HTTP at ``url`` within 2 s."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # any S3 answer (even 403) means radosgw serves
    except (urllib.error.URLError, OSError):
        return False


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Nothing listens on host:port (SO_REUSEADDR as the daemons use it: TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def mounted(path: Path) -> bool:
    target = str(path)
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    # field 5 is the mount point, with spaces etc. octal-escaped
    return any(line.split()[4].encode().decode("unicode_escape") == target for line in lines if line)


def unmount(path: Path, *, timeout: float = 15.0) -> str | None:
    """Unmount a FUSE mount; None on success, else what went wrong."""
    errors = []
    for argv in (["fusermount3", "-u", str(path)], ["fusermount", "-u", str(path)], ["umount", str(path)]):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            continue
        except subprocess.TimeoutExpired:
            errors.append(f"{argv[0]}: timed out")
            continue
        if r.returncode == 0 and not mounted(path):
            return None
        errors.append(f"{argv[0]}: {(r.stderr or r.stdout).strip()}")
    return "; ".join(errors) or "no fusermount or umount found"


def detach(path: Path) -> None:
    """Unmount ``path`` if mounted; a mount whose FUSE daemon died or hangs is detached lazily."""
    if mounted(path) and unmount(path) is not None:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


# ------------------------------------------------------------------ the ceph CLI, bound to a lab


def ceph(layout: LabPaths, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    argv = ["ceph", "-c", str(layout.conf), "--connect-timeout", str(int(timeout)), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=timeout + 5)


def ceph_json(layout: LabPaths, *args: str, timeout: float = 30) -> Any:
    r = ceph(layout, *args, "-f", "json", timeout=timeout)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        return None


def ceph_ok(layout: LabPaths, daemon: str, *args: str) -> str:
    r = ceph(layout, *args)
    if r.returncode != 0:
        raise failure(layout, daemon, f"`ceph {' '.join(args)}` failed: {r.stderr.strip()}")
    return r.stdout
