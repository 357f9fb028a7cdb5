"""Reading objects from S3-compatible stores: concurrent ranged GETs, bounded retries, counters.

The read path goes through fsspec (s3fs for s3://), with fsspec's and botocore's own retries
turned off so that every request, retry and failure is ours to count. Retries back off
exponentially with full jitter; errors that retrying cannot fix (wrong credentials, missing
bucket or key) fail at once with the URL in the message.
"""

from __future__ import annotations

import errno
import io
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fsspec

RETRYABLE_CODES = {
    "SlowDown",
    "ServiceUnavailable",
    "InternalError",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "500",
    "502",
    "503",
    "504",
}
FATAL_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EINVAL}
LATENCY_SAMPLE = 4096


class ObjectStoreError(OSError):
    """A request failed for good: names the URL, what happened, and the attempts made."""


@dataclass
class RequestStats:
    """Per-process request counters; merged across workers like StageStats."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    bytes: int = 0
    latencies_ms: list[float] = field(default_factory=list)  # a bounded sample
    fault_kinds: dict[str, int] = field(default_factory=dict)

    def record(self, seconds: float, nbytes: int) -> None:
        self.requests += 1
        self.bytes += nbytes
        if len(self.latencies_ms) < LATENCY_SAMPLE:
            self.latencies_ms.append(seconds * 1000.0)
        else:  # reservoir sampling keeps the sample unbiased over long runs
            j = random.randrange(self.requests)
            if j < LATENCY_SAMPLE:
                self.latencies_ms[j] = seconds * 1000.0

    def fault(self, kind: str) -> None:
        self.fault_kinds[kind] = self.fault_kinds.get(kind, 0) + 1

    def merge(self, other: RequestStats) -> None:
        self.requests += other.requests
        self.retries += other.retries
        self.failures += other.failures
        self.bytes += other.bytes
        room = LATENCY_SAMPLE - len(self.latencies_ms)
        self.latencies_ms.extend(other.latencies_ms[: max(0, room)])
        for k, v in other.fault_kinds.items():
            self.fault_kinds[k] = self.fault_kinds.get(k, 0) + v

    def as_dict(self) -> dict[str, Any]:
        import numpy as np

        lat = np.asarray(self.latencies_ms) if self.latencies_ms else None
        pct = (
            dict(zip(("p50", "p95", "p99"), np.percentile(lat, [50, 95, 99]).tolist(), strict=True))
            if lat is not None
            else {}
        )
        return {
            "requests": self.requests,
            "retries": self.retries,
            "failures": self.failures,
            "bytes": self.bytes,
            "latency_ms": pct,
            "faults": dict(self.fault_kinds),
        }


def classify(exc: BaseException) -> str | None:
    """The retryable fault kind of an exception, or None when retrying cannot help."""
    code = getattr(exc, "response", {}) or {}
    code = (code.get("Error") or {}).get("Code") if isinstance(code, dict) else None
    text = f"{type(exc).__name__} {exc}"
    if code in RETRYABLE_CODES or any(
        c in text for c in ("SlowDown", "ServiceUnavailable", "503", "InternalError")
    ):
        return "throttled_or_5xx"
    if isinstance(exc, (PermissionError, FileNotFoundError, IsADirectoryError)):
        return None
    if isinstance(exc, ConnectionError) or any(
        c in text
        for c in ("Connection reset", "ServerDisconnected", "ConnectionClosed", "RemoteDisconnected")
    ):
        return "connection_reset"
    if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
        return "timeout"
    if "IncompleteRead" in text or "ClientPayloadError" in text or "ResponseStreamingError" in text:
        return "truncated_body"
    if "EndpointConnectionError" in text or "Could not connect" in text or "Cannot connect" in text:
        return "connect_failed"
    if isinstance(exc, OSError) and exc.errno in FATAL_ERRNOS:
        return None
    if isinstance(exc, OSError) and exc.errno in (errno.EIO, None):
        return "io_error"
    return None


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    base_delay_s: float = 0.05
    max_delay_s: float = 2.0

    def delay(self, attempt: int) -> float:
        # full jitter (AWS architecture blog): spreads retries of many workers apart
        return random.uniform(0.0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


class ObjectReader:
    """Concurrent ranged reads of one object store, shared by the loader's readers in a process."""

    def __init__(
        self,
        storage_options: dict | None = None,
        *,
        part_bytes: int = 8 * 2**20,
        concurrency: int = 4,
        policy: RetryPolicy | None = None,
        protocol: str = "s3",
        filesystem: Any = None,
    ) -> None:
        """``filesystem``: an fsspec filesystem to use instead of building one from the options."""
        options = dict(storage_options or {})
        if protocol == "s3":
            # our retries only: counted, jittered, bounded
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("retries", {"max_attempts": 1, "mode": "standard"})
            options["config_kwargs"] = config
        # a fresh instance: fsspec caches filesystems by arguments, which would pin old credentials
        self.fs = filesystem or fsspec.filesystem(protocol, skip_instance_cache=True, **options)
        if protocol == "s3" and filesystem is None:
            self.fs.retries = 1  # s3fs's own retry loop (a class attribute, not a constructor option)
        self.part_bytes, self.concurrency = part_bytes, max(1, concurrency)
        self.policy = policy or RetryPolicy()
        self.stats = RequestStats()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="iobench-get")
        return self._pool

    def _call(self, what: str, url: str, fn: Callable[[], Any], nbytes: Callable[[Any], int]) -> Any:
        last: BaseException | None = None
        for attempt in range(self.policy.attempts):
            t0 = time.perf_counter()
            try:
                result = fn()
            except Exception as exc:
                kind = classify(exc)
                with self._lock:
                    self.stats.requests += 1
                    if kind is None:
                        self.stats.failures += 1
                    else:
                        self.stats.fault(kind)
                if kind is None:
                    raise ObjectStoreError(
                        getattr(exc, "errno", None) or errno.EIO, f"{what} {url}: {exc}"
                    ) from None
                last = exc
                if attempt + 1 < self.policy.attempts:
                    with self._lock:
                        self.stats.retries += 1
                    time.sleep(self.policy.delay(attempt))
                continue
            with self._lock:
                self.stats.record(time.perf_counter() - t0, nbytes(result))
            return result
        with self._lock:
            self.stats.failures += 1
        raise ObjectStoreError(
            errno.EIO, f"{what} {url}: gave up after {self.policy.attempts} attempts, last error: {last}"
        )

    def take_stats(self) -> RequestStats:
        """The counters since the last call; the reader starts new ones (per-batch accounting)."""
        with self._lock:
            stats, self.stats = self.stats, RequestStats()
        return stats

    def info(self, url: str) -> dict:
        """Size and ETag (HEAD)."""
        info = self._call("HEAD", url, lambda: self.fs.info(url), lambda _: 0)
        return {
            "size": int(info["size"]),
            "etag": (info.get("ETag") or info.get("etag") or "").strip('"') or None,
        }

    def read_range(self, url: str, start: int, end: int) -> bytes:
        data = self._call("GET", url, lambda: self.fs.cat_file(url, start=start, end=end), len)
        if len(data) != end - start:
            # a short body is a fault like any other: fetch the rest rather than hand back a torn object
            with self._lock:
                self.stats.fault("truncated_body")
            return data + self.read_range(url, start + len(data), end)
        return data

    def _ranges(self, size: int) -> list[tuple[int, int]]:
        return [(s, min(size, s + self.part_bytes)) for s in range(0, size, self.part_bytes)] or [(0, 0)]

    def download(self, url: str, out: BinaryIO, size: int | None = None) -> int:
        """Write the whole object to ``out`` with up to ``concurrency`` ranged GETs in flight."""
        size = self.info(url)["size"] if size is None else size
        written = 0
        for chunk in self._ordered(url, self._ranges(size)):
            out.write(chunk)
            written += len(chunk)
        return written

    def _ordered(self, url: str, ranges: list[tuple[int, int]]):
        """Yield the ranges' bytes in order, keeping ``concurrency`` GETs in flight ahead of the reader."""
        pool = self._executor()
        pending: deque[Future] = deque()
        todo = iter(ranges)
        for start, end in todo:
            pending.append(pool.submit(self.read_range, url, start, end))
            if len(pending) >= self.concurrency:
                break
        while pending:
            chunk = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(pool.submit(self.read_range, url, *nxt))
            yield chunk

    def open_stream(self, url: str, size: int | None = None) -> BinaryIO:
        """A read-only stream of the object with read-ahead; no local copy is made."""
        size = self.info(url)["size"] if size is None else size
        return _ChunkStream(self._ordered(url, self._ranges(size)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class _ChunkStream(io.RawIOBase):
    def __init__(self, chunks) -> None:
        self._chunks, self._buf, self._pos = chunks, b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self._pos >= len(self._buf):
            nxt = next(self._chunks, None)
            if nxt is None:
                return 0
            self._buf, self._pos = nxt, 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n
