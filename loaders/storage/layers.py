"""Reading a shard through layers: each wraps an inner opener and owns one setting of the
:class:`~loaders.storage.spec.SourceSpec`, as fsspec's caching filesystem wraps an inner
filesystem and owns its cache's parameters. From the inside out:

    StoreOpener     the object store (storage options, part size, concurrency, endpoints), local
                    files and any other fsspec URL
    DeadlineOpener  ``deadline_s`` for a file system's reads (an object store's reader bounds each
                    request itself: only it sees the request's retries)
    ThrottleOpener  ``throttle``: a slower link, charged per request and by the bytes read
    CacheOpener     ``cache``: local copies of object-store shards

The order is where each acts: the throttle emulates the link to the storage, so a cache hit never
crosses it and a miss crosses it as one download; the deadline bounds the file system's own calls,
under the link. ``stack`` builds only the layers whose setting is given.

A stack is built in the process that reads (clients do not survive a fork) and is used from
several threads at once (per-sample reads), so the store makes its clients under a lock.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, Protocol, TypeVar

import fsspec

from loaders.observe.counters import LoaderCounters
from loaders.observe.stages import StageStats
from loaders.storage.deadline import DeadlineFile
from loaders.storage.localfile import open_local
from loaders.storage.spec import SourceSpec
from loaders.storage.throttle import Throttle, ThrottledFile

if TYPE_CHECKING:
    from loaders.storage.objectstore import ObjectReader  # imported on first use (StoreOpener.reader)

OBJECT_PROTOCOLS = ("s3", "s3a", "rados")


def protocol_of(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "file"


class Layer:
    """An opener that hands what it does not change to ``inner``."""

    def __init__(self, inner: StackOpener) -> None:
        self.inner = inner

    def open(
        self, url: str, start: int = 0, end: int | None = None
    ) -> contextlib.AbstractContextManager[BinaryIO]:
        """The shard as a stream from byte ``start``; ``end``: no byte at or past it is needed
        (an object store then GETs no further; a file may read on past it)."""
        return self.inner.open(url, start, end)

    def read_object(self, url: str) -> bytes:
        """A whole (small) object: one ranged GET on an object store, one read on a file system."""
        return self.inner.read_object(url)

    def download(self, url: str, out: BinaryIO, size: int | None) -> None:
        """The whole object written to ``out`` (a cache's download of one shard)."""
        self.inner.download(url, out, size)

    def drain_into(self, stats: StageStats) -> None:
        """Move the counters gathered since the last drain into ``stats``."""
        self.inner.drain_into(stats)

    def close(self) -> None:
        self.inner.close()


class StoreOpener:
    """The innermost opener: object stores through one ObjectReader per protocol, local files,
    any other URL through fsspec."""

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self._readers: dict[str, ObjectReader] = {}
        self._lock = threading.Lock()

    def reader(self, protocol: str) -> ObjectReader:
        """This protocol's ObjectReader, made on first use: a process whose reads all hit a
        cache never pays for a client (an S3 session, a librados connection)."""
        with self._lock:
            if protocol not in self._readers:
                from loaders.storage.objectstore import ObjectReader

                self._readers[protocol] = ObjectReader(
                    self.spec.storage_options,
                    client=self.spec.client,
                    part_bytes=self.spec.part_bytes,
                    concurrency=self.spec.concurrency,
                    protocol="s3" if protocol in ("s3", "s3a") else protocol,
                    deadline_s=self.spec.deadline_s,
                    endpoints=self.spec.endpoints,
                    answered=self.spec.answered_endpoints,
                )
            return self._readers[protocol]

    @contextlib.contextmanager
    def open(self, url: str, start: int = 0, end: int | None = None) -> Iterator[BinaryIO]:
        protocol = protocol_of(url)
        if protocol == "file":
            with open_local(url.removeprefix("file://")) as f:
                yield _at(f, start)
        elif protocol in OBJECT_PROTOCOLS:
            stream = self.reader(protocol).open_stream(url, self.spec.shard_sizes.get(url), start, end)
            try:
                yield stream
            finally:
                stream.close()
        else:
            with fsspec.open(url, "rb", **self.spec.storage_options) as f:
                yield _at(f, start)

    def read_object(self, url: str) -> bytes:
        protocol = protocol_of(url)
        if protocol in OBJECT_PROTOCOLS:
            reader = self.reader(protocol)
            size = self.spec.shard_sizes.get(url)
            if size is None:
                size = reader.info(url)["size"]
            return reader.read_range(url, 0, size)
        if protocol == "file":
            with open(url.removeprefix("file://"), "rb") as f:
                return f.read()
        with fsspec.open(url, "rb", **self.spec.storage_options) as f:
            return f.read()

    def download(self, url: str, out: BinaryIO, size: int | None) -> None:
        self.reader(protocol_of(url)).download(url, out, size)

    def drain_into(self, stats: StageStats) -> None:
        for reader in self._readers.values():
            rs = reader.take_stats()
            stats.counters.merge(LoaderCounters(requests=rs.counts))
            stats.add_latencies(rs.latencies_ms)

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()


StackOpener = StoreOpener | Layer


class DeadlineOpener(Layer):
    """Every open, read and close of a local file (a network file system's) returns within
    ``deadline_s`` or fails (DeadlineFile); other URLs pass through."""

    def __init__(self, inner: StackOpener, deadline_s: float) -> None:
        super().__init__(inner)
        self.deadline_s = deadline_s

    @contextlib.contextmanager
    def open(self, url: str, start: int = 0, end: int | None = None) -> Iterator[BinaryIO]:
        if protocol_of(url) != "file":
            with self.inner.open(url, start, end) as f:
                yield f
            return
        with DeadlineFile(url.removeprefix("file://"), self.deadline_s) as f:
            yield _at(f, start)  # type: ignore[misc]  # a file-like object: typing.BinaryIO is a class, not a protocol it could meet

    def read_object(self, url: str) -> bytes:
        if protocol_of(url) != "file":
            return self.inner.read_object(url)
        with DeadlineFile(url.removeprefix("file://"), self.deadline_s) as f:
            return f.read()


class ThrottleOpener(Layer):
    """Each open, whole-object read and download is one request over the throttled link; the bytes
    it returns are charged to the link's bandwidth."""

    def __init__(self, inner: StackOpener, throttle: Throttle) -> None:
        super().__init__(inner)
        self.throttle = throttle

    @contextlib.contextmanager
    def open(self, url: str, start: int = 0, end: int | None = None) -> Iterator[BinaryIO]:
        self.throttle.request()
        with self.inner.open(url, start, end) as f:
            yield ThrottledFile(f, self.throttle)  # type: ignore[misc]  # a file-like object: typing.BinaryIO is a class, not a protocol it could meet

    def read_object(self, url: str) -> bytes:
        self.throttle.request()
        data = self.inner.read_object(url)
        self.throttle.charge(len(data))
        return data

    def download(self, url: str, out: BinaryIO, size: int | None) -> None:
        self.throttle.request()
        self.inner.download(url, out, size)
        self.throttle.charge(out.tell())

    def drain_into(self, stats: StageStats) -> None:
        self.inner.drain_into(stats)
        stats.counters.merge(LoaderCounters(throttle=self.throttle.take_counters()))

    def close(self) -> None:
        self.inner.close()
        self.throttle.close()


class CacheOpener(Layer):
    """Object-store shards are read from a bounded local copy, downloaded through ``inner`` on a
    miss; a static cache that is full reads the rest through ``inner``. Files, other URLs and
    whole-object reads (one object per sample) pass through.

    The cache never stops the reader (cachehealth.py): a cache that fails (a full, read-only or
    failing disk, its directory removed) is read around, said once and tried again later; a
    download that does not match the store's own checksum is read through, not cached. A store
    that fails is the store's error, as without a cache."""

    def __init__(self, inner: StackOpener, spec: SourceSpec) -> None:
        super().__init__(inner)
        assert spec.cache is not None
        self.spec, self.settings = spec, spec.cache
        self._cache = None
        from loaders.storage.cachehealth import CacheHealth

        self.health = CacheHealth(self.settings.dir)

    def shard_cache(self):
        if self._cache is None:  # made in the process that reads, on its first shard
            from loaders.storage.shardcache import ShardCache, choose_policy, default_cache_bytes

            limit = self.settings.bytes or default_cache_bytes(self.settings.dir)
            sizes = self.spec.shard_sizes
            policy = choose_policy(self.settings.policy, limit, sum(sizes.values()) if sizes else None)
            self._cache = ShardCache(self.settings.dir, limit, policy=policy, verify=self.settings.verify)
        return self._cache

    @contextlib.contextmanager
    def open(self, url: str, start: int = 0, end: int | None = None) -> Iterator[BinaryIO]:
        cached, around = None, False
        if protocol_of(url) in OBJECT_PROTOCOLS:
            if self.health.usable():
                cached, around = self._cached(url, start, end)
            else:
                around = True
        if cached is None:
            with self.inner.open(url, start, end) as f:
                yield self.health.bypassing(f) if around else f
            return
        with cached:
            yield _at(cached, start)  # the whole shard is cached; a part of it is read from there

    def _cached(self, url: str, start: int, end: int | None) -> tuple[BinaryIO | None, bool]:
        """The cache's open copy of ``url`` (None: read it through), and whether the cache failed."""
        from loaders.storage.shardcache import StoreChecksumError

        size = self.spec.shard_sizes.get(url)
        store_failed: list[BaseException] = []

        def fetch(u: str, out: BinaryIO) -> None:
            try:
                self.inner.download(u, out, size)
            except BaseException as exc:  # the store's own failure is not the cache's
                store_failed.append(exc)
                raise

        for attempt in (1, 2):
            try:
                f = self.shard_cache().open_shard(
                    url,
                    fetch,
                    size=size,
                    etag=self.spec.etags.get(url),
                    sha256=self.spec.shard_sha256.get(url),
                    start=start,
                    end=end,
                )
                return f, False
            except StoreChecksumError as exc:
                self.health.counts.store_checksum_mismatches += 1
                self.health.say(f"store:{url}", f"{exc}: read through from the store, not cached")
                return None, False
            except OSError as exc:
                if store_failed and _from_store(exc, store_failed[-1]):
                    raise
                if attempt == 1 and self._recreated():
                    store_failed.clear()
                    continue  # the directory was removed under the job: made again, tried once more
                self.health.failed(exc, url)
                return None, True
        raise AssertionError("unreachable")

    def _recreated(self) -> bool:
        """The cache directory was removed: make it (and the cache) again; whether that worked."""
        if os.path.isdir(self.settings.dir):
            return False
        self._cache = None
        try:
            self.shard_cache()
        except OSError:
            return False
        self.health.counts.recreated += 1
        self.health.say("recreated", f"the shard cache directory {self.settings.dir} was removed: made again")
        return True

    def drain_into(self, stats: StageStats) -> None:
        self.inner.drain_into(stats)
        if self._cache is not None:
            stats.counters.merge(LoaderCounters(cache=self._cache.reset_stats()))
            stats.add_notes(self._cache.notes)
            self._cache.notes = []
        health, notes = self.health.drain()
        stats.counters.merge(LoaderCounters(cache_health=health))
        stats.add_notes(notes)


def _from_store(exc: BaseException, store: BaseException) -> bool:
    """Whether ``exc``, raised out of the cache, is the store's failure ``store`` (an object store's
    error, or a download cut by anything but the cache's own disk)."""
    from loaders.storage.cachehealth import MEDIUM_ERRNOS
    from loaders.storage.faults import ObjectStoreError

    if isinstance(store, ObjectStoreError):
        return True
    chain: BaseException | None = exc
    while chain is not None and chain is not store:
        chain = chain.__cause__ or chain.__context__
    return chain is store and getattr(store, "errno", None) not in MEDIUM_ERRNOS


class _Seekable(Protocol):
    def seek(self, pos: int, whence: int = ..., /) -> int: ...


_S = TypeVar("_S", bound=_Seekable)  # the stream comes back as what it is, a file or a DeadlineFile


def _at(f: _S, start: int) -> _S:
    """A seekable stream positioned at ``start``."""
    if start:
        f.seek(start)
    return f


def stack(spec: SourceSpec) -> StackOpener:
    """The layers ``spec`` asks for, over the store."""
    opener: StackOpener = StoreOpener(spec)
    if spec.deadline_s:
        opener = DeadlineOpener(opener, spec.deadline_s)
    if spec.throttle is not None:
        opener = ThrottleOpener(opener, Throttle(spec.throttle))
    if spec.cache is not None:
        opener = CacheOpener(opener, spec)
    return opener
