"""fio's direct sequential write and read of a checkpoint's bytes in the checkpoint's own directory:
the device's figure a file store's saves and restores are set against in the same run (4 MiB blocks,
libaio, 8 in flight, fsync at the end; caches dropped before the read where root may)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass

from iobench.host.pagecache import drop_all_caches

BLOCK = 4 << 20


@dataclass(frozen=True)
class FioFigures:
    write_gb_per_s: float
    read_gb_per_s: float
    bytes: int
    how: str = "fio --rw=write|read --direct=1 --bs=4M --ioengine=libaio --iodepth=8 --end_fsync=1"


def fio_reference(directory: str, nbytes: int) -> FioFigures | None:
    """fio on ``nbytes`` (whole 4 MiB blocks) in ``directory``; None where fio is not installed."""
    if not shutil.which("fio"):
        return None
    size = max(BLOCK, nbytes // BLOCK * BLOCK)
    path = os.path.join(directory, ".iobench-fio")
    try:
        write = _run(path, "write", size)
        drop_all_caches()
        read = _run(path, "read", size)
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return FioFigures(write / 1e9, read / 1e9, size)


def _run(path: str, rw: str, size: int) -> float:
    cmd = [
        "fio", "--name=iobench-ckpt", f"--filename={path}", f"--rw={rw}", f"--bs={BLOCK}", "--iodepth=8",
        "--ioengine=libaio", "--direct=1", f"--size={size}", "--end_fsync=1", "--output-format=json",
    ]  # fmt: skip
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return float(out["jobs"][0][rw]["bw_bytes"])
