"""Reads with a deadline on a network file system (CephFS, NFS): a read that stops for good (a
dead OSD behind ceph-fuse) fails within the deadline, naming the file, instead of hanging the job.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import io
import os
import queue
import stat
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from loaders.storage.faults import DeadlineExceeded
from loaders.storage.localfile import BUFFER

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer  # a type checker's name for what readinto writes into


class DeadlineFile(io.BufferedIOBase):
    """A local file (on a network file system: CephFS, NFS) whose every open, read and close must
    return within ``deadline_s``, else DeadlineExceeded names the file, the offset and the wait.

    A read that blocks in the kernel (ceph-fuse waiting for a dead OSD: measured, for good) cannot
    be interrupted, so the system calls run on a helper thread and the caller waits for them with a
    time-out; a blocked helper is abandoned (it is killable, and dies with the process). Buffered
    like ``open(path, "rb", buffering=BUFFER)``: one system call and one thread hand-off per
    4 MiB, and the same single copy per ``read(n)`` as a BufferedReader (each chunk is the bytes
    object the helper's ``os.pread`` returned, never a buffer the helper could write into late).
    """

    def __init__(self, path: str, deadline_s: float, buffer_size: int = BUFFER) -> None:
        super().__init__()
        self.path, self.deadline_s, self.buffer_size = path, deadline_s, buffer_size
        self._chunk, self._at, self._offset = b"", 0, 0  # chunk, pos in it, file pos
        self._size: int | None = None  # the file's, once a seek from its end needs it
        self._fd: int | None = None
        self._stuck = False  # a call timed out: the file system hangs, so close() does not wait
        self._fd, self._regular = self._within(f"opening {path}", _open_sequential, path)

    def _within(self, what: str, fn: Callable, *args):
        future = helper_threads().submit(fn, *args)
        try:
            return future.result(self.deadline_s)
        except concurrent.futures.TimeoutError:
            self._stuck = True
            raise DeadlineExceeded(
                errno.ETIMEDOUT,
                f"{what}: no progress within the {self.deadline_s:g} s deadline (the system call is still "
                "blocked in the kernel: the file system's server side stopped answering)",
            ) from None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("I/O operation on closed file")
        return self._fd

    def tell(self) -> int:
        return self._offset - (len(self._chunk) - self._at)

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            pos += self.tell()
        elif whence == os.SEEK_END:
            if self._size is None:
                self._size = self._within(f"stat {self.path}", os.fstat, self.fileno()).st_size
            pos += self._size
        self._chunk, self._at, self._offset = b"", 0, max(0, pos)
        return self._offset

    def _pread(self, n: int) -> bytes:
        where = f"reading {self.path} at byte {self._offset}"
        if self._regular:
            data = self._within(where, os.pread, self.fileno(), n, self._offset)
        else:  # a pipe or device: no offsets
            data = self._within(where, os.read, self.fileno(), n)
        self._offset += len(data)
        return data

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            parts = [self._chunk[self._at :]]
            self._chunk, self._at = b"", 0
            while block := self._pread(self.buffer_size):
                parts.append(block)
            return b"".join(parts)
        at = self._at
        if len(self._chunk) - at >= n:  # the common case: a member inside the buffered chunk
            self._at = at + n
            return self._chunk[at : at + n]
        parts, want = [], n
        while want > 0:  # like a BufferedReader: n bytes unless the file ends first
            have = len(self._chunk) - self._at
            if have == 0:
                if want >= self.buffer_size:  # a big read goes straight through
                    block = self._pread(want)
                    if not block:
                        break
                    parts.append(block)
                    want -= len(block)
                    continue
                self._chunk, self._at = self._pread(self.buffer_size), 0
                have = len(self._chunk)
                if have == 0:
                    break
            take = min(want, have)
            parts.append(self._chunk[self._at : self._at + take])
            self._at += take
            want -= take
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read1(self, n: int = -1) -> bytes:
        have = len(self._chunk) - self._at
        if have:
            n = have if n is None or n < 0 else min(n, have)
        return self.read(n if n is not None and n >= 0 else self.buffer_size)

    def readinto(self, b: WriteableBuffer) -> int:
        with memoryview(b) as view, view.cast("B") as into:  # any writable buffer, as bytes
            data = self.read(len(into))
            into[: len(data)] = data
        return len(data)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None and self._stuck:
            helper_threads().submit(os.close, fd)  # it may block as the read did: never wait for it
        elif fd is not None:
            with contextlib.suppress(OSError):  # a close that blocks is left to its helper
                self._within(f"closing {self.path}", os.close, fd)
        super().close()


def _open_sequential(path: str) -> tuple[int, bool]:
    """(fd, a regular file?), read-ahead hinted."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    return fd, regular


class _Helpers:
    """Daemon threads that run calls that may never return (DeadlineFile's system calls, an object
    client's attempt without a timeout of its own). Not a ThreadPoolExecutor: its threads are
    joined when the interpreter exits, so a thread blocked in the kernel would keep a DataLoader
    worker from exiting (measured: the cell's failure came 5 s late, torch's join time-out, before
    it killed the worker). A daemon thread is not waited for; killable waits end with the process."""

    def __init__(self, name: str, max_threads: int) -> None:
        self.name, self.max_threads = name, max_threads
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0

    def submit(self, fn: Callable, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self.lock:
            if self.idle:  # a thread waits for work: it takes this task
                self.idle -= 1
            elif self.threads < self.max_threads:  # else one more, unless all are busy (or blocked)
                self.threads += 1
                threading.Thread(target=self._work, name=self.name, daemon=True).start()
        self.tasks.put((future, fn, args))
        return future

    def _work(self) -> None:
        while True:
            future, fn, args = self.tasks.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:
                    future.set_exception(exc)
            with self.lock:
                self.idle += 1


_HELPERS: dict[tuple[int, str], _Helpers] = {}
_HELPERS_LOCK = threading.Lock()


def helper_threads(name: str = "iobench-read", max_threads: int = 16) -> _Helpers:
    """This process's helper threads called ``name`` (a forked DataLoader worker makes its own: the
    parent's threads do not exist in the child)."""
    pid = os.getpid()
    with _HELPERS_LOCK:
        pool = _HELPERS.get((pid, name))
        if pool is None:
            for key in [k for k in _HELPERS if k[0] != pid]:
                del _HELPERS[key]
            pool = _HELPERS[(pid, name)] = _Helpers(name, max_threads)
        return pool
