"""Where shard bytes come from: any fsspec URL, an object store streamed with read-ahead, or a
bounded local cache in front of the object store.

A source is built from picklable settings and opens its clients lazily, in the process that
reads (DataLoader workers fork or spawn after the loader is built; network clients do not
survive either).
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import fsspec

from loaders.observe.stages import StageStats
from loaders.storage.localfile import BUFFER, open_local
from loaders.storage.objectstore import DEADLINE_KEY, fsspec_options
from loaders.storage.throttle import Throttle, ThrottledFile, ThrottleSpec

OBJECT_PROTOCOLS = ("s3", "s3a", "rados")


@dataclass
class SourceSpec:
    """Picklable description of how to read shards."""

    storage_options: dict = field(default_factory=dict)
    cache_dir: str | None = None
    cache_bytes: int | None = None
    # what a cache smaller than the data keeps (loaders/storage/shardcache.py, Admission): "auto" is static when
    # ``sizes`` say the shards are more than the cache, else lru
    cache_policy: str = "auto"
    part_bytes: int = 8 * 2**20
    concurrency: int = 4
    sizes: dict[str, int] = field(default_factory=dict)  # url -> bytes, saves a HEAD per shard
    etags: dict[str, str] = field(default_factory=dict)
    throttle: ThrottleSpec | None = None  # emulate a slower link: bandwidth cap + latency per request

    def __repr__(self) -> str:  # storage options may hold credentials: never print them
        throttle = f", throttle={self.throttle!r}" if self.throttle else ""
        return f"SourceSpec(cache_dir={self.cache_dir!r}, cache_bytes={self.cache_bytes}{throttle}, ...)"


class ShardSource:
    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self._readers: dict[str, object] = {}
        self._cache = None
        self._lock = threading.Lock()
        self._throttle = Throttle(spec.throttle) if spec.throttle is not None else None

    def _reader(self, protocol: str):
        with self._lock:  # per-sample reads call this from several threads
            return self._make_reader(protocol)

    def _make_reader(self, protocol: str):
        if protocol not in self._readers:
            from loaders.storage.objectstore import ObjectReader

            self._readers[protocol] = ObjectReader(
                self.spec.storage_options,
                part_bytes=self.spec.part_bytes,
                concurrency=self.spec.concurrency,
                protocol="s3" if protocol in ("s3", "s3a") else protocol,
            )
        return self._readers[protocol]

    def _shard_cache(self):
        if self._cache is None:
            from loaders.storage.shardcache import ShardCache, choose_policy

            limit = self.spec.cache_bytes or default_cache_bytes(self.spec.cache_dir)
            dataset = sum(self.spec.sizes.values()) if self.spec.sizes else None
            policy = choose_policy(self.spec.cache_policy, limit, dataset)
            self._cache = ShardCache(self.spec.cache_dir, limit, policy=policy)
        return self._cache

    @contextlib.contextmanager
    def open(self, url: str) -> Iterator[BinaryIO]:
        protocol = _protocol(url)
        throttle = self._throttle
        if throttle is None or self._behind_cache(protocol):
            # a cache hit never crosses the throttled link; a miss is charged in its download
            with self._open_raw(url, protocol) as f:
                yield f
            return
        throttle.request()
        with self._open_raw(url, protocol) as f:
            yield ThrottledFile(f, throttle)  # type: ignore[misc]

    def _behind_cache(self, protocol: str) -> bool:
        return protocol in OBJECT_PROTOCOLS and bool(self.spec.cache_dir)

    def _deadline(self) -> float | None:
        """The tier's deadline for a read that makes no progress (the storage option ``deadline_s``)."""
        value = self.spec.storage_options.get(DEADLINE_KEY)
        return float(value) if value else None

    def _fsspec_options(self) -> dict:
        return fsspec_options(self.spec.storage_options)

    @contextlib.contextmanager
    def _open_raw(self, url: str, protocol: str) -> Iterator[BinaryIO]:
        if protocol == "file":
            path = url.removeprefix("file://")
            deadline = self._deadline()
            if deadline is not None:  # a network file system (CephFS) whose reads may stop for good
                with DeadlineFile(path, deadline) as f:
                    yield f  # type: ignore[misc]
                return
            with open_local(path) as f:
                yield f
            return
        if protocol not in OBJECT_PROTOCOLS:
            with fsspec.open(url, "rb", **self._fsspec_options()) as f:
                yield f
            return
        size = self.spec.sizes.get(url)
        if self.spec.cache_dir:
            f = self._shard_cache().open_shard(
                url, self._fetcher(protocol, size), size=size, etag=self.spec.etags.get(url)
            )
            if f is not None:
                with f:
                    yield f
                return
            # a static cache that is full: read through as without a cache, over the throttled
            # link that open() left to the cache's downloads
            with self._stream(self._reader(protocol), url, size, self._throttle) as stream:
                yield stream
            return
        with self._stream(self._reader(protocol), url, size, None) as stream:
            yield stream

    @contextlib.contextmanager
    def _stream(self, reader, url: str, size: int | None, throttle: Throttle | None) -> Iterator[BinaryIO]:
        stream = reader.open_stream(url, size)
        try:
            if throttle is None:
                yield stream
            else:
                throttle.request()
                yield ThrottledFile(stream, throttle)  # type: ignore[misc]
        finally:
            stream.close()

    def _fetcher(self, protocol: str, size: int | None) -> Callable[[str, BinaryIO], None]:
        """The cache's download of one shard; with a throttle it is one request over the link.
        The store's client is made on the first miss: a process whose reads all hit (a warm
        cache) never pays for one (an S3 session, a librados connection)."""
        throttle = self._throttle

        def fetch(url: str, out: BinaryIO) -> None:
            if throttle is not None:
                throttle.request()
            self._reader(protocol).download(url, out, size)
            if throttle is not None:
                throttle.charge(out.tell())

        return fetch

    def read_object(self, url: str) -> bytes:
        """A whole (small) object: one ranged GET on an object store, one read on a file system."""
        if self._throttle is None:
            return self._read_object_raw(url)
        self._throttle.request()
        data = self._read_object_raw(url)
        self._throttle.charge(len(data))
        return data

    def _read_object_raw(self, url: str) -> bytes:
        protocol = _protocol(url)
        if protocol in OBJECT_PROTOCOLS:
            reader = self._reader(protocol)
            size = self.spec.sizes.get(url)
            if size is None:
                size = reader.info(url)["size"]
            return reader.read_range(url, 0, size)
        if protocol == "file":
            deadline = self._deadline()
            if deadline is not None:
                with DeadlineFile(url.removeprefix("file://"), deadline) as f:
                    return f.read()
            with open(url.removeprefix("file://"), "rb") as f:
                return f.read()
        with fsspec.open(url, "rb", **self._fsspec_options()) as f:
            return f.read()

    def drain_into(self, stats: StageStats) -> None:
        """Move the request and cache counters gathered since the last drain into ``stats``."""
        for reader in self._readers.values():
            rs = reader.take_stats()
            stats.counters.update(
                {
                    "requests": rs.requests,
                    "retries": rs.retries,
                    "request_failures": rs.failures,
                    "bytes_transferred": rs.bytes,
                    **{f"fault_{kind}": n for kind, n in rs.fault_kinds.items()},
                    **{f"endpoint_{i}_requests": n for i, n in rs.by_endpoint.items()},
                }
            )
            stats.add_latencies(rs.latencies_ms)
        if self._cache is not None:
            stats.counters.update({f"cache_{k}": v for k, v in self._cache.reset_stats().as_dict().items()})
        if self._throttle is not None:
            stats.counters.update(self._throttle.take_counters())

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        if self._throttle is not None:
            self._throttle.close()


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
        self._chunk, self._at, self._offset, self._size = b"", 0, 0, None  # chunk, pos in it, file pos
        self._fd: int | None = None
        self._stuck = False  # a call timed out: the file system hangs, so close() does not wait
        self._fd, self._regular = self._within(f"opening {path}", _open_sequential, path)

    def _within(self, what: str, fn: Callable, *args):
        future = _helpers().submit(fn, *args)
        try:
            return future.result(self.deadline_s)
        except concurrent.futures.TimeoutError:
            from loaders.storage.objectstore import DeadlineExceeded

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

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None and self._stuck:
            _helpers().submit(os.close, fd)  # it may block as the read did: never wait for it
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
    """Daemon threads that run DeadlineFile's system calls. Not a ThreadPoolExecutor: its threads
    are joined when the interpreter exits, so a thread blocked in the kernel would keep a DataLoader
    worker from exiting (measured: the cell's failure came 5 s late, torch's join time-out, before
    it killed the worker). A daemon thread is not waited for; killable waits end with the process."""

    MAX_THREADS = 16

    def __init__(self) -> None:
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()
        self.lock = threading.Lock()
        self.threads = 0
        self.idle = 0

    def submit(self, fn: Callable, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self.lock:
            if self.idle:  # a thread waits for work: it takes this task
                self.idle -= 1
            elif self.threads < self.MAX_THREADS:  # else one more, unless all are busy (or blocked)
                self.threads += 1
                threading.Thread(target=self._work, name="iobench-read", daemon=True).start()
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


_HELPERS: dict[int, _Helpers] = {}
_HELPERS_LOCK = threading.Lock()


def _helpers() -> _Helpers:
    """This process's helper threads for DeadlineFile (a forked DataLoader worker makes its own: the
    parent's threads do not exist in the child)."""
    pid = os.getpid()
    with _HELPERS_LOCK:
        pool = _HELPERS.get(pid)
        if pool is None:
            _HELPERS.clear()
            pool = _HELPERS[pid] = _Helpers()
        return pool


def _protocol(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "file"


def source_for(spec: SourceSpec | None) -> ShardSource:
    return ShardSource(spec or SourceSpec())


def default_cache_bytes(directory: str) -> int:
    """Half of the free space on the cache's filesystem: a bound the user did not have to pick."""
    os.makedirs(directory, exist_ok=True)
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize // 2
