"""The CPUs this process may use: its affinity, capped by its cgroup's CPU quota.

A container limits CPUs in one of two ways. A cpuset (``docker --cpuset-cpus``) shows in the
affinity. A quota (``docker --cpus``, a Kubernetes CPU limit: the common one) does not: the
process still sees every core of the node, and 8 decode workers on a 64-core node limited to 4 CPUs
are throttled to 4 cores' worth. The quota is read from the cgroup (v2 ``cpu.max``, v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) at every level from the process's group up to the
root of the mount, the smallest one binding.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc/self")


def usable_cores(proc: Path = PROC) -> int:
    """The CPUs this process may run on (its affinity), capped by its CPU quota, rounded down (1.5
    CPUs of quota run two decoders at three quarters of their speed), at least 1."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota(proc)
    return affinity if quota is None else max(1, min(affinity, int(quota)))


def cpu_quota(proc: Path = PROC) -> float | None:
    """CPUs' worth of time per period that this process's cgroups allow (the smallest along its
    path), or None where no quota is set or none can be read."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in groups:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy, the controller's files in every group
            quotas += _walk(_mount(mounts, "cgroup2", None), path, _v2_quota)
        elif "cpu" in controllers.split(","):
            quotas += _walk(_mount(mounts, "cgroup", "cpu"), path, _v1_quota)
    return min(quotas, default=None)


def _mount(mountinfo: list[str], fstype: str, controller: str | None) -> tuple[str, str] | None:
    """(root of the hierarchy it shows, mount point) of the first cgroup mount of that kind."""
    for line in mountinfo:
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] != fstype:
            continue
        if controller is None or controller in fields[sep + 3].split(","):
            return fields[3], fields[4]
    return None


def _walk(mount: tuple[str, str] | None, path: str, read) -> list[float]:
    """The quotas from the group at ``path`` up to the mount's root, as far as the mount shows."""
    if mount is None:
        return []
    root, point = mount
    relative = os.path.relpath(path, root) if path.startswith(root) else "."
    quotas = []
    group = Path(point) / relative
    while True:
        quota = read(group)
        if quota is not None:
            quotas.append(quota)
        if group == Path(point) or group.parent == group:
            return quotas
        group = group.parent


def _v2_quota(group: Path) -> float | None:
    try:
        limit, period = (group / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if limit == "max" else int(limit) / int(period)


def _v1_quota(group: Path) -> float | None:
    try:
        quota = int((group / "cpu.cfs_quota_us").read_text())
        period = int((group / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period
