"""The shard cache's on-disk layout and locks (see loaders/storage/shardcache.py for the design).

    <sha256(url)>-<name>           a complete, verified shard
    .part-<sha256>.<pid>.<bytes>   an in-flight download; <bytes> is its reservation (0: size unknown)
    .locks/<sha256>                per-key flock, held for a whole download and for an eviction
    .sums/<sha256>                 the entry's size and part checksums at fill (entrysum.py),
                                   written before the entry appears and removed with it
    .lock                          global flock, held only to scan, reserve, evict and commit

Only the standard library: child processes can import this without the rest of ``loaders``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, overload

_ENTRY_RE = re.compile(r"^([0-9a-f]{64})-")
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_PART_RE = re.compile(r"^\.part-([0-9a-f]{64})\.(\d+)\.(\d+)$")


@dataclass
class CachedShard:
    """A complete cached shard."""

    name: str
    sha: str
    size: int
    mtime_ns: int


@dataclass
class Download:
    """A live download: ``charged`` = max(reservation, bytes written so far)."""

    sha: str
    reserved: int
    charged: int
    written: int


def key_of(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


def readable_name(url: str) -> str:
    # The url is never trusted as a path: only a sanitised last component, for humans reading ls.
    tail = url.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", tail)[-80:].lstrip(".") or "shard"


def unlink_quiet(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


# a directory that cannot be opened for reading or a file system that cannot sync one (some FUSE
# and network ones): the rename stands, only its durability is the file system's
_NO_DIRECTORY_SYNC = frozenset(
    {errno.EACCES, errno.EPERM, errno.EINVAL, errno.EBADF, errno.ENOTSUP, errno.EOPNOTSUPP}
)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new entry in ``directory`` durable; a disk's error (EIO) is raised."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        if err.errno in _NO_DIRECTORY_SYNC:
            return
        raise
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _NO_DIRECTORY_SYNC:
            raise
    finally:
        os.close(fd)


class CacheDir:
    """Locks and listing of one cache directory. Holds no open descriptor between calls: a
    descriptor inherited over fork would share its flock with the parent process."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.locks = os.path.join(directory, ".locks")
        self.sums = os.path.join(directory, ".sums")
        self.global_path = os.path.join(directory, ".lock")

    def sum_path(self, sha: str) -> str:
        return os.path.join(self.sums, sha)

    def part_path(self, sha: str, reserved: int) -> str:
        return os.path.join(self.directory, f".part-{sha}.{os.getpid()}.{reserved}")

    @contextlib.contextmanager
    def global_lock(self) -> Iterator[None]:
        fd = os.open(self.global_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @overload
    def lock_key(self, sha: str, op: int, *, block: Literal[True]) -> tuple[int, float]: ...
    @overload
    def lock_key(self, sha: str, op: int, *, block: bool) -> tuple[int | None, float]: ...
    def lock_key(self, sha: str, op: int, *, block: bool) -> tuple[int | None, float]:
        """flock ``.locks/<sha>``; return (fd, or None if busy and not blocking; seconds blocked).

        Blocking happens in the kernel (no polling) and ends when the holder releases or dies.
        """
        path = os.path.join(self.locks, sha)
        waited = 0.0
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                try:
                    fcntl.flock(fd, op | fcntl.LOCK_NB)
                except BlockingIOError:
                    if not block:
                        os.close(fd)
                        return None, waited
                    t0 = time.perf_counter()
                    fcntl.flock(fd, op)
                    waited += time.perf_counter() - t0
                # An evictor unlinks a lock file while holding it; whoever was queued on the old
                # inode must lock the new file, or two holders could coexist.
                if os.fstat(fd).st_ino == os.stat(path).st_ino:
                    return fd, waited
            except FileNotFoundError:
                pass
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def wait_for(self, sha: str) -> float:
        """Block until whoever holds key ``sha`` lets go; return the seconds waited."""
        fd, waited = self.lock_key(sha, fcntl.LOCK_EX, block=True)
        assert fd is not None
        os.close(fd)
        return waited

    def scan(self, *, clean: bool, held: str = "") -> tuple[list[CachedShard], list[Download]]:
        """Complete entries and live downloads; with ``clean``, remove the temps of dead writers.

        Call under the global lock. A temp whose key lock can be taken has no live writer (the
        writer holds it from before the temp exists until after it is gone). ``held``: a key this
        process has locked and has no temp for yet, so any temp of it is stale, although the lock
        test would call it live.
        """
        entries: list[CachedShard] = []
        inflight: list[Download] = []
        with os.scandir(self.directory) as it:
            for de in it:
                try:
                    if m := _ENTRY_RE.match(de.name):
                        st = de.stat(follow_symlinks=False)
                        entries.append(CachedShard(de.name, m.group(1), st.st_size, st.st_mtime_ns))
                    elif m := _PART_RE.match(de.name):
                        sha, reserved = m.group(1), int(m.group(3))
                        st = de.stat(follow_symlinks=False)
                        if clean and sha == held:
                            unlink_quiet(de.path)
                            continue
                        if clean:
                            fd, _ = self.lock_key(sha, fcntl.LOCK_EX, block=False)
                            if fd is not None:
                                unlink_quiet(de.path)
                                os.close(fd)
                                continue
                        inflight.append(Download(sha, reserved, max(st.st_size, reserved), st.st_size))
                except FileNotFoundError:
                    continue  # gone while we listed (a writer committed or failed)
        return entries, inflight

    def remove_entry(self, entry: CachedShard) -> bool:
        """Delete a complete entry unless its key is locked (being opened or re-fetched)."""
        fd, _ = self.lock_key(entry.sha, fcntl.LOCK_EX, block=False)
        if fd is None:
            return False
        try:
            unlink_quiet(os.path.join(self.directory, entry.name))
            unlink_quiet(self.sum_path(entry.sha))
            unlink_quiet(os.path.join(self.locks, entry.sha))  # see the inode check in lock_key
        finally:
            os.close(fd)
        return True

    def remove_unused_locks(self) -> None:
        for name in os.listdir(self.locks):
            fd, _ = self.lock_key(name, fcntl.LOCK_EX, block=False)
            if fd is not None:
                unlink_quiet(os.path.join(self.locks, name))
                os.close(fd)

    def remove_orphan_sums(self) -> None:
        """The checksums of entries that are gone (call under the global lock)."""
        present = {m.group(1) for name in os.listdir(self.directory) if (m := _ENTRY_RE.match(name))}
        for name in os.listdir(self.sums):
            if name in present or not _KEY_RE.match(name):
                continue
            fd, _ = self.lock_key(name, fcntl.LOCK_EX, block=False)  # held: a download in flight
            if fd is not None:
                unlink_quiet(os.path.join(self.sums, name))
                os.close(fd)
