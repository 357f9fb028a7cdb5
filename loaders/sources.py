"""Where shard bytes come from: any fsspec URL, an object store streamed with read-ahead, or a
bounded local cache in front of the object store.

A source is built from picklable settings and opens its clients lazily, in the process that
reads (DataLoader workers fork or spawn after the loader is built; network clients do not
survive either).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import fsspec

from .instrument import StageStats
from .throttle import Throttle, ThrottledFile, ThrottleSpec

OBJECT_PROTOCOLS = ("s3", "s3a", "rados")
LOCAL_BUFFER = 4 * 2**20


@dataclass
class SourceSpec:
    """Picklable description of how to read shards."""

    storage_options: dict = field(default_factory=dict)
    cache_dir: str | None = None
    cache_bytes: int | None = None
    # what a cache smaller than the data keeps (loaders/cache.py, Admission): "auto" is static when
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
            from .objectstore import ObjectReader

            self._readers[protocol] = ObjectReader(
                self.spec.storage_options,
                part_bytes=self.spec.part_bytes,
                concurrency=self.spec.concurrency,
                protocol="s3" if protocol in ("s3", "s3a") else protocol,
            )
        return self._readers[protocol]

    def _shard_cache(self):
        if self._cache is None:
            from .cache import ShardCache, choose_policy

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

    @contextlib.contextmanager
    def _open_raw(self, url: str, protocol: str) -> Iterator[BinaryIO]:
        if protocol == "file":
            # a large buffer turns ~110 KB member reads into 4 MiB reads: 3x the cold throughput
            # of the default 8 KiB buffer on this kind of VM (benchmarks/bench_local_read.py)
            with open(url.removeprefix("file://"), "rb", buffering=LOCAL_BUFFER) as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
                yield f
            return
        if protocol not in OBJECT_PROTOCOLS:
            with fsspec.open(url, "rb", **self.spec.storage_options) as f:
                yield f
            return
        reader = self._reader(protocol)
        size = self.spec.sizes.get(url)
        if self.spec.cache_dir:
            f = self._shard_cache().open_shard(
                url, self._fetcher(reader, size), size=size, etag=self.spec.etags.get(url)
            )
            if f is not None:
                with f:
                    yield f
                return
            # a static cache that is full: read through as without a cache, over the throttled
            # link that open() left to the cache's downloads
            with self._stream(reader, url, size, self._throttle) as stream:
                yield stream
            return
        with self._stream(reader, url, size, None) as stream:
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

    def _fetcher(self, reader, size: int | None) -> Callable[[str, BinaryIO], None]:
        """The cache's download of one shard; with a throttle it is one request over the link."""
        throttle = self._throttle

        def fetch(url: str, out: BinaryIO) -> None:
            if throttle is not None:
                throttle.request()
            reader.download(url, out, size)
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
            with open(url.removeprefix("file://"), "rb") as f:
                return f.read()
        with fsspec.open(url, "rb", **self.spec.storage_options) as f:
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


def _protocol(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "file"


def source_for(spec: SourceSpec | None) -> ShardSource:
    return ShardSource(spec or SourceSpec())


def default_cache_bytes(directory: str) -> int:
    """Half of the free space on the cache's filesystem: a bound the user did not have to pick."""
    os.makedirs(directory, exist_ok=True)
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize // 2
