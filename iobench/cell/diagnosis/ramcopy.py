"""Files held in RAM for the prep ceiling: memfds that other processes open by a shard-like name.

Not files in /dev/shm, for two reasons. Containers give that mount 64 MiB unless told otherwise
(Docker, Kubernetes): far less than the copy a prep ceiling needs, while the memory itself is
there. And a file there outlives a cell that is killed (by the OOM killer, or by the sweep's
watchdog): its RAM stays taken until someone deletes it, charged to the container's memory limit,
and the next cells run short of memory. A memfd is the same shared memory (shmem pages) without
the mount's cap, and the kernel frees it with the last descriptor and mapping, however the cell
ends. Each copy is one memfd, reached through a symlink named like the shard (the loaders read a
shard's format from its name) that points at /proc/<pid>/fd/<n>: any process of the user can
open it, forked or spawned, for as long as this process holds the descriptor. A killed cell leaves
only that directory of dangling symlinks in the temporary directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

from iobench.host.memory import Memory, usable_memory

RAM_BUDGET_FRACTION = 0.25  # of the memory available now


def ram_budget() -> tuple[int, Memory]:
    """Bytes that copies may take now, and the memory they are taken from."""
    memory = usable_memory()  # a container's memory limit holds these copies too
    return int(memory.available * RAM_BUDGET_FRACTION), memory


class RamCopies:
    """A directory of files whose bytes are in RAM; ``need_bytes`` must fit the RAM budget (the
    one ``ram_budget()`` gives now, or the one given)."""

    where = "memory (memfd)"

    def __init__(self, need_bytes: int, budget: tuple[int, Memory] | None = None) -> None:
        budget_bytes, memory = budget or ram_budget()
        if need_bytes > budget_bytes:
            raise RuntimeError(
                f"{need_bytes / 2**20:,.0f} MiB do not fit the RAM budget "
                f"({int(RAM_BUDGET_FRACTION * 100)} % of the memory available: {memory.describe()})"
            )
        self.directory = Path(tempfile.mkdtemp(prefix="iobench-prep-"))
        self._fds: list[int] = []

    def create(self, name: str) -> tuple[BinaryIO, str]:
        """A new file ``name``, open for writing, and the path that reads it."""
        fd = os.memfd_create(name)
        self._fds.append(fd)
        path = self.directory / name
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
