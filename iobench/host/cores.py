"""The CPUs this process may use: its affinity, capped by its cgroup's CPU quota.

A container limits CPUs in one of two ways. A cpuset (``docker --cpuset-cpus``) shows in the
affinity. A quota (``docker --cpus``, a Kubernetes CPU limit: the common one) does not: the
process still sees every core of the node, and 8 decode workers on a 64-core node limited to 4 CPUs
are throttled to 4 cores' worth. The quota is read from the cgroup (v2 ``cpu.max``, v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) at every level from the process's group up to the
root of the mount (host/cgroup.py), the smallest one binding.
"""

from __future__ import annotations

import os
from pathlib import Path

from .cgroup import PROC, group_dirs
from .sysfs import read_int


def usable_cores(proc: Path = PROC) -> int:
    """The CPUs this process may run on (its affinity), capped by its CPU quota, rounded down (1.5
    CPUs of quota run two decoders at three quarters of their speed), at least 1."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cpu_quota(proc)
    return affinity if quota is None else max(1, min(affinity, int(quota)))


def cpu_quota(proc: Path = PROC) -> float | None:
    """CPUs' worth of time per period that this process's cgroups allow (the smallest along its
    path), or None where no quota is set or none can be read."""
    quotas = [q for group in group_dirs("cpu", proc) if (q := _quota(group)) is not None]
    return min(quotas, default=None)


def _quota(group: Path) -> float | None:
    try:  # v2
        limit, period = (group / "cpu.max").read_text().split()
        return None if limit == "max" else int(limit) / int(period)
    except (OSError, ValueError):
        pass
    quota_us, period_us = read_int(group / "cpu.cfs_quota_us"), read_int(group / "cpu.cfs_period_us")  # v1
    if quota_us is None or period_us is None or quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us
