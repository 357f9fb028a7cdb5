"""Small real file systems for fault tests: a tmpfs of a given size (ENOSPC from the kernel when
it fills), or mounted read-only. Mounting needs root (CAP_SYS_ADMIN), which CI has: there a failed
mount fails the test; elsewhere it skips."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.lab_fixture import ceph_missing


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True
    )
    if r.returncode:
        ceph_missing(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)
