"""The CPUs this process may use."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity), which a container or taskset may limit."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
