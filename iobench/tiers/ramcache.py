"""The RAM shard caches sweeps make in /dev/shm: named, owned, removed, and found when left behind.

A tier's ``memory_cache`` is a ShardCache on tmpfs, ``/dev/shm/iobench-cache-<tier>-<uid>``. RAM
held there is gone for everything else on the host until the directory is removed, so a sweep

* claims it before its first cell: ``.iobench-owner.json`` inside names the sweep (pid, its
  process start time, run directory) and whether it is to be kept (tier option
  ``keep_memory_cache``);
* removes it when it ends (done, failed, or stopped by SIGTERM/Ctrl-C), unless it is to be kept;
* finds, at start, the RAM caches of sweeps that died without removing theirs (SIGKILL, a crash, a
  reboot of the sweep's machine but not of tmpfs' host, ...) and removes them, and reports caches
  kept on request, with their size and path.

A ShardCache ignores files that are not its entries, so the owner file does not disturb it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

RAM_CACHE_ROOT = "/dev/shm"
RAM_MEDIUM = "RAM (tmpfs)"  # a tier's cache medium when it is one of these
PREFIX = "iobench-cache-"
OWNER_FILE = ".iobench-owner.json"


def ram_cache_path(tier_name: str, root: str = RAM_CACHE_ROOT) -> str:
    """The RAM cache directory of the tier named ``tier_name`` for this user."""
    safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in tier_name)
    return os.path.join(root, f"{PREFIX}{safe}-{os.getuid()}")


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat): with the pid,
    it names a process for good (a pid alone may be reused)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def dir_bytes(path: str | os.PathLike[str]) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def claim(path: str, run_dir: str | os.PathLike[str], *, keep: bool) -> None:
    """Mark ``path`` (created if need be) as this sweep's RAM cache."""
    os.makedirs(path, exist_ok=True)
    owner = {
        "sweep_pid": os.getpid(),
        "sweep_started": _start_time(os.getpid()),
        "run_dir": str(run_dir),
        "keep": keep,
        "claimed_at": time.time(),
    }
    tmp = os.path.join(path, f".{OWNER_FILE}.tmp")
    with open(tmp, "w") as f:
        json.dump(owner, f)
    os.replace(tmp, os.path.join(path, OWNER_FILE))


def release(path: str) -> int:
    """Remove the RAM cache ``path``; the bytes it held (0 when it was not there)."""
    if not os.path.isdir(path):
        return 0
    held = dir_bytes(path)
    shutil.rmtree(path, ignore_errors=True)
    return held


@dataclass(frozen=True)
class Leftover:
    path: str
    bytes: int
    owner_pid: int | None
    run_dir: str | None
    kept: bool  # kept on request (keep_memory_cache)
    owner_alive: bool  # the sweep that made it still runs

    def describe(self) -> str:
        who = f"sweep pid {self.owner_pid} (run {self.run_dir})" if self.owner_pid else "an unknown process"
        return f"{self.path}: {self.bytes / 1e6:,.1f} MB in RAM, made by {who}"


def _read_owner(path: str) -> dict:
    try:
        with open(os.path.join(path, OWNER_FILE)) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def leftovers(root: str = RAM_CACHE_ROOT) -> list[Leftover]:
    """This user's RAM caches under ``root``, with who made them and whether that sweep still runs."""
    out = []
    suffix = f"-{os.getuid()}"
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    for name in names:
        path = os.path.join(root, name)
        if not (name.startswith(PREFIX) and name.endswith(suffix)) or not os.path.isdir(path):
            continue
        owner = _read_owner(path)
        pid = owner.get("sweep_pid") if isinstance(owner.get("sweep_pid"), int) else None
        alive = (
            pid is not None
            and _start_time(pid) is not None
            and _start_time(pid) == owner.get("sweep_started")
        )
        out.append(
            Leftover(
                path=path,
                bytes=dir_bytes(path),
                owner_pid=pid,
                run_dir=owner.get("run_dir"),
                kept=bool(owner.get("keep")),
                owner_alive=alive,
            )
        )
    return out


def remove_partial_downloads(cache_dir: str) -> int:
    """Remove the temp files of downloads whose writer is gone (a cell killed mid-download); how many.

    A live writer holds its key's lock, so its temp file stays (loaders.storage.shardcache_index.CacheDir.scan)."""
    from loaders.storage import CacheDir

    if not os.path.isdir(cache_dir):
        return 0

    def parts() -> int:
        return sum(1 for n in os.listdir(cache_dir) if n.startswith(".part-"))

    before = parts()
    if not before:
        return 0
    d = CacheDir(cache_dir)
    with d.global_lock():
        d.scan(clean=True)
    return before - parts()
