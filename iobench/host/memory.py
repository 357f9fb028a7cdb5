"""The memory this process may use: the host's, capped by its memory cgroup's limit; and how many
processes the kernel's OOM killer has killed.

A container's memory limit (``docker --memory``, a Kubernetes pod's ``limits.memory``) is set on
a cgroup; /proc/meminfo still shows the whole node. The limit also holds the page cache that the
group's reads fill, so a dataset larger than the limit cannot stay in the page cache of a container
on a node with RAM to spare. A group that reaches its limit and cannot reclaim has one of its
processes killed by the OOM killer: SIGKILL, nothing printed, counted in the group's memory.events
(v2; with its descendants) or memory.oom_control (v1), and in the host's /proc/vmstat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .cgroup import PROC, group_dirs
from .sysfs import read_int
from .units import format_bytes

MEMINFO = Path("/proc/meminfo")
VMSTAT = Path("/proc/vmstat")


@dataclass(frozen=True)
class Memory:
    available: int  # bytes that can still be taken: MemAvailable, or less where the cgroup binds
    limit: int | None  # the cgroup's limit in bytes where it is below MemTotal, else None
    host_total: int  # bytes: MemTotal

    @property
    def total(self) -> int:
        """Bytes this process's processes may hold: the cgroup's limit, else the host's memory."""
        return self.host_total if self.limit is None else self.limit

    def describe(self) -> str:
        if self.limit is not None:
            return (
                f"a memory cgroup limit of {format_bytes(self.limit)} ({format_bytes(self.available)} "
                f"available; the host has {format_bytes(self.host_total)})"
            )
        return f"{format_bytes(self.total)}, {format_bytes(self.available)} available"


def usable_memory(proc: Path = PROC, meminfo: Path = MEMINFO) -> Memory:
    """The host's memory and what is available of it, each capped by the smallest limit of this
    process's memory cgroups (the process's own and those above it). A group's available memory is
    its limit less what its processes hold that cannot be reclaimed (all but inactive file pages)."""
    host = read_meminfo(meminfo)
    total, available = host.get("MemTotal", 0), host.get("MemAvailable", host.get("MemFree", 0))
    limit = None
    for group in group_dirs("memory", proc):
        cap = read_int(group / "memory.max")
        if cap is None:
            cap = read_int(group / "memory.limit_in_bytes")  # v1: 2**63 less a page means none
        if cap is None or cap >= total:
            continue
        limit = cap if limit is None else min(limit, cap)
        used = read_int(group / "memory.current") or read_int(group / "memory.usage_in_bytes") or 0
        stat = _stat(group / "memory.stat")
        # v1's hierarchical key first: its inactive_file is the group's own, its usage includes children
        inactive = stat.get("total_inactive_file", stat.get("inactive_file", 0))
        available = min(available, max(0, cap - (used - inactive)))
    return Memory(available, limit, total)


def oom_kills(proc: Path = PROC, vmstat: Path = VMSTAT) -> tuple[int, str] | None:
    """How many processes the OOM killer has killed so far, and where that is counted: this
    process's memory cgroup where it counts them, else the host; None where neither can be read."""
    groups = group_dirs("memory", proc)
    if groups:
        for name in ("memory.events", "memory.oom_control"):
            count = _stat(groups[0] / name).get("oom_kill")
            if count is not None:
                return count, f"in this memory cgroup ({groups[0]})"
    count = _stat(vmstat).get("oom_kill")
    return None if count is None else (count, "on this host (/proc/vmstat)")


def _stat(path: Path) -> dict[str, int]:
    """A cgroup or /proc file of "key value" lines."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+) (\d+)$", text, re.M)}


def read_meminfo(path: Path = MEMINFO) -> dict[str, int]:
    """/proc/meminfo's fields in bytes; empty where it cannot be read."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    return {m.group(1): int(m.group(2)) * 1024 for m in re.finditer(r"^(\w+):\s+(\d+)\s*kB", text, re.M)}
