"""A store of files on a local or mounted file system (local disk, CephFS), buffered or O_DIRECT.

A checkpoint ``ID`` is written into ``ID.partial/`` beside where it will live; its commit writes
``.metadata`` there, fsyncs it and the directory, then renames ``ID.partial`` to ``ID`` and fsyncs
the parent: a crash or a full disk at any moment leaves either no checkpoint ``ID`` or a whole one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from loaders.storage import fsync_dir

from .aligned import ALIGN
from .errors import CheckpointError, CheckpointMissing
from .store import METADATA_NAME

PARTIAL_SUFFIX = ".partial"


class FilePart:
    def __init__(self, path: Path, direct: bool) -> None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_DIRECT if direct else 0)
        self.path = path
        self.fd = os.open(path, flags, 0o644)

    def pwrite(self, data: memoryview, offset: int) -> int:
        return os.pwrite(self.fd, data, offset)

    def close(self) -> None:
        try:
            os.fsync(self.fd)
        finally:
            os.close(self.fd)


class FileReader:
    def __init__(self, path: Path, direct: bool) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        except FileNotFoundError:
            raise CheckpointMissing(f"{path} is missing: the checkpoint's metadata names it") from None
        self.size = os.fstat(self.fd).st_size

    def preadinto(self, buf: memoryview, offset: int) -> int:
        return os.preadv(self.fd, [buf], offset)

    def close(self) -> None:
        os.close(self.fd)


class LocalStore:
    """Checkpoints as directories under ``root``; ``direct``: every part read and written with
    O_DIRECT (the page cache bypassed), else through the page cache and fsync'd at the end."""

    def __init__(
        self, root: str | os.PathLike[str], *, direct: bool = False, name: str = "local disk"
    ) -> None:
        self.root = Path(root)
        self.direct = direct
        self.where = f"{name} {self.root}" + (" (O_DIRECT)" if direct else "")
        self.alignment = ALIGN if direct else 1
        self.item_alignment = ALIGN

    def final(self, checkpoint_id: str) -> Path:
        return self.root / checkpoint_id

    def staging(self, checkpoint_id: str) -> Path:
        return self.root / f"{checkpoint_id}{PARTIAL_SUFFIX}"

    def open_part(self, checkpoint_id: str, name: str) -> FilePart:
        if self.final(checkpoint_id).exists():
            raise CheckpointError(
                f"{self.final(checkpoint_id)} exists: a committed checkpoint is never overwritten; "
                "save under a new id or remove it"
            )
        staging = self.staging(checkpoint_id)
        staging.mkdir(parents=True, exist_ok=True)
        return FilePart(staging / name, self.direct)

    def commit(self, checkpoint_id: str, metadata: bytes) -> None:
        staging = self.staging(checkpoint_id)
        with open(staging / METADATA_NAME, "wb") as f:
            f.write(metadata)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(staging)
        os.rename(staging, self.final(checkpoint_id))
        fsync_dir(self.root)

    def abort(self, checkpoint_id: str) -> None:
        shutil.rmtree(self.staging(checkpoint_id), ignore_errors=True)

    def read_metadata(self, checkpoint_id: str) -> bytes:
        path = self.final(checkpoint_id) / METADATA_NAME
        try:
            return path.read_bytes()
        except FileNotFoundError:
            partial = (
                " (an unfinished save left only its .partial directory)"
                if self.staging(checkpoint_id).exists()
                else ""
            )
            raise CheckpointMissing(
                f"no committed checkpoint at {self.final(checkpoint_id)}{partial}"
            ) from None

    def open_reader(self, checkpoint_id: str, name: str) -> FileReader:
        return FileReader(self.final(checkpoint_id) / name, self.direct)

    def locate(self, checkpoint_id: str, name: str) -> str:
        return str(self.final(checkpoint_id) / name)

    def local_files(self, checkpoint_id: str) -> list[str]:
        with contextlib.suppress(FileNotFoundError):
            return sorted(str(p) for p in self.final(checkpoint_id).iterdir() if p.is_file())
        return []

    def clear(self) -> None:
        """Every checkpoint under the root, finished or not (a directory of the caller's own)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def remove(self, checkpoint_id: str) -> None:
        shutil.rmtree(self.final(checkpoint_id), ignore_errors=True)
        with contextlib.suppress(OSError):  # the store's directory too, once nothing is left in it
            self.root.rmdir()
