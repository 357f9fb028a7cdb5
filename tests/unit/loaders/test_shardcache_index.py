"""fsync_dir: the one directory sync of the shard cache, atomic writes and local checkpoints."""

from __future__ import annotations

import errno
import os

import pytest

from loaders.storage import fsync_dir


def test_a_directory_is_synced_and_its_descriptor_closed(tmp_path, monkeypatch):
    synced, closed = [], []
    real_fsync, real_close = os.fsync, os.close
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    monkeypatch.setattr(os, "close", lambda fd: (closed.append(fd), real_close(fd)))
    fsync_dir(tmp_path)
    assert synced and synced == closed


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOTSUP, errno.EBADF])
def test_a_file_system_that_cannot_sync_a_directory_is_let_be(tmp_path, monkeypatch, code):
    def refuse(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", refuse)
    fsync_dir(tmp_path)


def test_a_disk_error_and_a_missing_directory_are_raised(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "gone")

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError) as caught:
        fsync_dir(tmp_path)
    assert caught.value.errno == errno.EIO
