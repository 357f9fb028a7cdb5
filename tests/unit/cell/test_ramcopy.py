"""The prep ceiling's RAM copies: on tmpfs where /dev/shm has room, else in memfds that other
processes open by a shard-like name."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from iobench.cell import ramcopy
from iobench.cell.ramcopy import RamCopies
from loaders.localfile import MappedFile, open_local


def test_a_roomy_dev_shm_holds_the_copy_as_files(tmp_path):
    with RamCopies(1_000_000) as ram:
        dst, path = ram.create("000000.tar")
        with dst:
            dst.write(b"x" * 1000)
        assert ram.on_tmpfs and path.startswith("/dev/shm/") and not os.path.islink(path)
    assert not os.path.exists(path)


def test_without_room_in_dev_shm_the_copy_is_a_memfd_that_another_process_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(ramcopy, "SHM_DIR", str(tmp_path / "no-shm-here"))  # 0 bytes free
    data = os.urandom(300_000)
    with RamCopies(len(data)) as ram:
        dst, path = ram.create("000000.tar")
        with dst:
            dst.write(data)
        assert not ram.on_tmpfs and "memfd" in ram.where and path.endswith("000000.tar")
        assert os.readlink(path).startswith(f"/proc/{os.getpid()}/fd/")
        with open_local(path) as mapped:  # as a loader opens a local shard: mapped
            assert isinstance(mapped, MappedFile) and mapped.read() == data
        read = [sys.executable, "-c", f"import sys; sys.stdout.buffer.write(open({path!r}, 'rb').read())"]
        assert subprocess.run(read, capture_output=True, check=True).stdout == data  # a new process
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))


def test_a_copy_over_the_ram_budget_is_refused_saying_how_much(monkeypatch):
    with pytest.raises(RuntimeError, match=r"do not fit the RAM budget \(25 % of the [\d,]+ MiB"):
        RamCopies(2**50)
