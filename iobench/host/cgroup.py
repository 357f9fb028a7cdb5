"""The control groups this process is in: for a controller, its group's directory and those above it.

A container's limits (``docker --cpus/--memory``, a Kubernetes pod's limits) are set on a group
that the process, or one of its ancestors, is in; the process still sees the whole node in
/proc/cpuinfo and /proc/meminfo. cgroup v2 has one hierarchy, every controller's files in every
group; v1 mounts one hierarchy per controller (or per set of them). A container's mount may show
only part of a hierarchy (its root is the container's own group), so the walk stops at the mount.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc/self")


def group_dirs(controller: str, proc: Path = PROC) -> list[Path]:
    """The directories of this process's ``controller`` groups, its own first, then each one above
    it up to the root of the mount; empty where none can be read."""
    try:
        groups = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return []
    v2 = None
    for line in groups:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            v2 = path
        elif controller in controllers.split(","):  # a v1 hierarchy, or a hybrid host's v1 part
            return _up_from(_mount(mounts, "cgroup", controller), path)
    return [] if v2 is None else _up_from(_mount(mounts, "cgroup2", None), v2)


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


def _up_from(mount: tuple[str, str] | None, path: str) -> list[Path]:
    if mount is None:
        return []
    root, point = mount
    inside = path == root or path.startswith(root.rstrip("/") + "/")
    relative = os.path.relpath(path, root) if inside else "."
    group, top = Path(point) / relative, Path(point)
    dirs = [group]
    while group != top and group.parent != group:
        group = group.parent
        dirs.append(group)
    return dirs
