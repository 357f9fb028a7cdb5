"""Files held in RAM for the prep ceiling: tmpfs at /dev/shm where it has room, else memfd.

Containers give /dev/shm 64 MiB unless told otherwise (Docker, Kubernetes): far less than the
copy a prep ceiling needs, while the memory itself is there. A memfd is the same shared memory
(shmem pages, charged to the container's memory limit) without the mount's size cap. Each copy is
one memfd, reached through a symlink named like the shard (the loaders read a shard's format from
its name) that points at /proc/<pid>/fd/<n>: any process of the user can open it, forked or
spawned, for as long as this process holds the descriptor.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

import psutil

SHM_DIR = "/dev/shm"
RAM_BUDGET_FRACTION = 0.25  # of the memory available now
SHM_FRACTION = 0.5  # of /dev/shm's free space: the loader's batch buffers live there too


class RamCopies:
    """A directory of files whose bytes are in RAM; ``need_bytes`` must fit the RAM budget."""

    def __init__(self, need_bytes: int) -> None:
        budget = psutil.virtual_memory().available * RAM_BUDGET_FRACTION
        if need_bytes > budget:
            raise RuntimeError(
                f"{need_bytes / 2**20:,.0f} MiB do not fit the RAM budget "
                f"({int(RAM_BUDGET_FRACTION * 100)} % of the {budget / RAM_BUDGET_FRACTION / 2**20:,.0f} MiB "
                "of memory available)"
            )
        shm_free = shutil.disk_usage(SHM_DIR).free if os.path.isdir(SHM_DIR) else 0
        self.on_tmpfs = need_bytes <= shm_free * SHM_FRACTION
        self.directory = Path(
            tempfile.mkdtemp(prefix="iobench-prep-", dir=SHM_DIR if self.on_tmpfs else None)
        )
        self.where = (
            f"tmpfs at {SHM_DIR}"
            if self.on_tmpfs
            else f"memory (memfd: {SHM_DIR} has {shm_free / 2**20:,.0f} MiB free)"
        )
        self._fds: list[int] = []

    def create(self, name: str) -> tuple[BinaryIO, str]:
        """A new file ``name``, open for writing, and the path that reads it."""
        path = self.directory / name
        if self.on_tmpfs:
            return open(path, "wb"), str(path)
        fd = os.memfd_create(name)
        self._fds.append(fd)
        path.symlink_to(f"/proc/{os.getpid()}/fd/{fd}")
        return open(fd, "wb", closefd=False), str(path)

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        for fd in self._fds:
            os.close(fd)  # the memory goes with the last descriptor and mapping
        self._fds = []

    def __enter__(self) -> RamCopies:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
