"""The prep ceiling's RAM copies: memfds that other processes open by a shard-like name, and that
the kernel frees however the process holding them ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from iobench.cell.diagnosis.ramcopy import RamCopies
from loaders.storage.localfile import MappedFile, open_local


def test_the_copy_is_a_memfd_that_another_process_reads():
    data = os.urandom(300_000)
    with RamCopies(len(data)) as ram:
        dst, path = ram.create("000000.tar")
        with dst:
            dst.write(data)
        assert "memfd" in ram.where and path.endswith("000000.tar")
        assert os.readlink(path).startswith(f"/proc/{os.getpid()}/fd/")
        with open_local(path) as mapped:  # as a loader opens a local shard: mapped
            assert isinstance(mapped, MappedFile) and mapped.read() == data
        read = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write(open({path!r}, 'rb').read())"]
        assert subprocess.run(read, capture_output=True, check=True).stdout == data  # a new process
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))


_HOLD = """
import sys
from iobench.cell.diagnosis.ramcopy import RamCopies
ram = RamCopies(200 * 2**20)
dst, path = ram.create("000000.tar")
dst.write(b"x" * (200 * 2**20))
dst.flush()
print(path, flush=True)
sys.stdin.read()
"""


def test_a_process_killed_holding_copies_leaves_no_memory_taken():
    """A cell killed by the OOM killer or the sweep's watchdog (SIGKILL) never runs its cleanup; a
    copy in /dev/shm stayed there, its RAM taken until someone deleted it (475 MB after two such
    cells here, charged to the container's limit). A memfd goes with its process."""
    before = _shmem()
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    path = proc.stdout.readline().strip()
    held = _shmem()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    after = _shmem()
    print(f"figures: shared memory {before:,} MiB, {held:,} holding a 200 MiB copy, {after:,} after SIGKILL")
    assert held - before >= 190  # the copy was in shared memory
    assert held - after >= 190  # and is free again
    assert not os.path.exists(path)  # a dangling symlink is all that is left of it
    os.unlink(path)
    os.rmdir(os.path.dirname(path))


def _shmem() -> int:
    """MiB of shared memory (tmpfs, memfd) on the host, /proc/meminfo's Shmem."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) // 1024 for line in f if line.startswith("Shmem:"))


def test_a_copy_over_the_ram_budget_is_refused_saying_how_much():
    with pytest.raises(
        RuntimeError, match=r"do not fit the RAM budget \(25 % of the memory available: [\d.]+ GiB, "
    ):
        RamCopies(2**50)


def test_the_prep_copy_takes_fewer_shards_only_where_the_budget_is_short():
    from iobench.cell.diagnosis.ceilings import _fitting

    shards = [(10, 1)] * 10  # ten 10-byte shards
    assert _fitting(shards, 10, 4, budget=10**9) == 10  # all fit: none dropped, whatever the readers
    assert _fitting(shards, 10, 4, budget=75) == 4  # 7 fit; a multiple of the 4 readers
    assert _fitting(shards, 10, 2, budget=75) == 6
    assert _fitting(shards, 10, 4, budget=5) == 4  # never fewer than the readers: RamCopies refuses
    many = [(1, 1)] * 40_000
    assert _fitting(many, 40_000, 1, budget=1_000) == 1_000  # objects, one an item: no quadratic walk
