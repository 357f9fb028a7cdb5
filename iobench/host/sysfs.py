"""Reading sysfs and procfs under a configurable root, where every file may be missing.

VMs, containers and old kernels lack many attributes, and some exist but fail to read (a NIC's
``speed`` is EINVAL while its link is down): each read gives None rather than an exception.
"""

from __future__ import annotations

import os


def under(root: str, *parts: str) -> str:
    """``root/parts...``: the absolute paths of the live system, re-rooted at ``root``."""
    return os.path.join(root, *(p.lstrip("/") for p in parts))


def read_text(path: str | os.PathLike[str]) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def read_int(path: str | os.PathLike[str]) -> int | None:
    """The integer in ``path``; None where it is absent, unreadable or not an integer (a cgroup's "max")."""
    text = read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def read_numa_node(device_dir: str) -> int | None:
    """A PCI device's NUMA node; -1 (the firmware does not say: one node, or a VM) is None."""
    node = read_int(os.path.join(device_dir, "numa_node"))
    return node if node is not None and node >= 0 else None


def list_dir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def parse_cpulist(text: str) -> list[int]:
    """The kernel's CPU list format, ``0-15,32-47`` → [0, 1, ..., 15, 32, ..., 47]."""
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus
