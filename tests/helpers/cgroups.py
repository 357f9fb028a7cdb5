"""Real control groups for tests: a new group with limits set, and commands run inside it, as a
container's runtime (docker --cpus/--memory, Kubernetes limits) would place them.

Needs root and a writable cgroup file system, which CI has: there a failure to make one fails the
test; elsewhere it skips, saying why (``ceph_missing``)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.helpers.lab_fixture import ceph_missing

ROOT = Path("/sys/fs/cgroup")


@contextlib.contextmanager
def new_group(controller: str, v1: Mapping[str, str], v2: Mapping[str, str]) -> Iterator[Path]:
    """A new group of ``controller`` with the files ``v1`` (a v1 hierarchy) or ``v2`` (the unified
    one, where the controller is enabled) written; removed afterwards."""
    name = f"iobench-test-{uuid.uuid4().hex[:8]}"
    try:
        if (ROOT / controller / "cgroup.procs").exists():
            group, settings = ROOT / controller / name, v1
        elif controller in (ROOT / "cgroup.subtree_control").read_text().split():
            group, settings = ROOT / name, v2
        else:
            ceph_missing(
                f"no cgroup {controller} controller to set a limit with (v1, or v2 with +{controller})"
            )
        group.mkdir()
        for file, value in settings.items():
            (group / file).write_text(value)
    except OSError as exc:
        ceph_missing(
            f"cannot make a cgroup with a {controller} limit (needs root and a writable cgroup fs): {exc}"
        )
    try:
        yield group
    finally:
        with contextlib.suppress(OSError):  # a process still in it: the kernel keeps it until then
            group.rmdir()


def inside(group: Path, argv: list[str]) -> list[str]:
    """``argv`` run as a process of ``group`` (and so are the processes it starts)."""
    return ["sh", "-c", f'echo $$ > {group / "cgroup.procs"} && exec "$@"', "sh", *argv]
