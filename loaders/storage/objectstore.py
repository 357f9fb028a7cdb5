"""Reading objects from S3-compatible stores: concurrent ranged GETs, bounded retries, counters.

The read path goes through fsspec (s3fs for s3://), with fsspec's and botocore's own retries
turned off so that every request, retry and failure is ours to count. Retries back off
exponentially with full jitter; errors that retrying cannot fix (wrong credentials, missing
bucket or key) fail at once with the URL in the message. A store that has answered and then
refuses or resets connections (a gateway restarting) is retried until the deadline instead of
within the attempt budget (loaders/storage/outage.py); one that never answered fails fast.
"""

from __future__ import annotations

import errno
import io
import os
import random
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import fsspec
import fsspec.asyn

from loaders.storage.outage import OUTAGE_FAULTS, OutageClock
from loaders.storage.spec import DEFAULT_CONCURRENCY, DEFAULT_PART_BYTES

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
NO_CONNECTION = OUTAGE_FAULTS | {"connect_timeout"}  # faults after which another gateway is tried at once
LATENCY_SAMPLE = 4096


class ObjectStoreError(OSError):
    """A request failed for good: names the URL, what happened, and the attempts made."""


class DeadlineExceeded(ObjectStoreError):
    """The storage gave no answer (or no progress) within the deadline: a timeout, not a refusal.

    Its message says which request, how many attempts in how long, and each attempt's own limits."""


@dataclass
class RequestStats:
    """Per-process request counters; merged across workers like StageStats."""

    requests: int = 0
    retries: int = 0
    failures: int = 0
    bytes: int = 0
    latencies_ms: list[float] = field(default_factory=list)  # a bounded sample
    fault_kinds: dict[str, int] = field(default_factory=dict)
    by_endpoint: dict[int, int] = field(default_factory=dict)  # requests per endpoint (several only)
    refused_connections: int = 0  # attempts refused or reset by a store that had answered (an outage)
    outage_s: float = 0.0  # seconds with a request waiting out an outage (OutageClock)

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
        self.refused_connections += other.refused_connections
        self.outage_s += other.outage_s
        room = LATENCY_SAMPLE - len(self.latencies_ms)
        self.latencies_ms.extend(other.latencies_ms[: max(0, room)])
        for k, v in other.fault_kinds.items():
            self.fault_kinds[k] = self.fault_kinds.get(k, 0) + v
        for i, n in other.by_endpoint.items():
            self.by_endpoint[i] = self.by_endpoint.get(i, 0) + n

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
            "refused_connections": self.refused_connections,
            "outage_s": self.outage_s,
            "latency_ms": pct,
            "faults": dict(self.fault_kinds),
        }


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception, what it wraps (botocore keeps the transport error in ``kwargs["error"]``) and
    its causes: s3fs turns a ClientError into an OSError and aiohttp's errors hide behind botocore's."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo and len(out) < 16:
        e = todo.pop(0)
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        inner = (getattr(e, "kwargs", None) or {}).get("error") if isinstance(e, Exception) else None
        todo += [inner if isinstance(inner, BaseException) else None, e.__cause__, e.__context__]
    return out


def _describe(exc: BaseException | None) -> str:
    """The error and, when botocore's words hide it ("Could not connect"), the transport error."""
    if exc is None:
        return "none"
    inner = (getattr(exc, "kwargs", None) or {}).get("error")
    return f"{exc} ({type(inner).__name__}: {inner})" if isinstance(inner, BaseException) else str(exc)


def _s3_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = (response.get("Error") or {}).get("Code")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return str(code or status or "") or None


def classify(exc: BaseException) -> str | None:
    """The retryable fault kind of an exception, or None when retrying cannot help."""
    chain = exception_chain(exc)
    codes = [c for c in map(_s3_code, chain) if c]
    text = " ".join(f"{type(e).__name__} {e}" for e in chain)
    if any(c in RETRYABLE_CODES for c in codes) or any(
        c in text for c in ("SlowDown", "ServiceUnavailable", "reduce your request rate", "InternalError")
    ):
        return "throttled_or_5xx"
    if codes:  # the server answered, and not with something a retry can fix (403, 404, ...)
        return None
    # s3fs maps SlowDown/503/409 to EBUSY and 500 to EREMOTEIO, sometimes without the cause attached
    if isinstance(exc, OSError) and exc.errno in (errno.EBUSY, errno.EREMOTEIO):
        return "throttled_or_5xx"
    if isinstance(exc, (PermissionError, FileNotFoundError, IsADirectoryError)):
        return None
    if "IncompleteRead" in text or "ClientPayloadError" in text or "ResponseStreamingError" in text:
        return "truncated_body"
    if any(isinstance(e, ConnectionResetError) for e in chain) or any(
        c in text
        for c in ("Connection reset", "ServerDisconnected", "ConnectionClosed", "RemoteDisconnected")
    ):
        return "connection_reset"
    if any("ConnectTimeout" in type(e).__name__ for e in chain) or "Connect timeout" in text:
        return "connect_timeout"  # no TCP connection at all: nothing is known to listen there
    if any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in chain):
        return "timeout"
    if isinstance(exc, ConnectionError) or any(
        c in text for c in ("EndpointConnectionError", "Could not connect", "Cannot connect")
    ):
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
    # backoff cap while an outage is ridden through: a gateway back is found within a second
    outage_max_delay_s: float = 1.0

    def delay(self, attempt: int, cap: float | None = None) -> float:
        # full jitter (AWS architecture blog): spreads retries of many workers apart
        limit = self.max_delay_s if cap is None else cap
        return random.uniform(0.0, min(limit, self.base_delay_s * 2**attempt))


class ObjectReader:
    """Concurrent ranged reads of one object store, shared by the loader's readers in a process."""

    def __init__(
        self,
        storage_options: Mapping | None = None,
        *,
        part_bytes: int = DEFAULT_PART_BYTES,
        concurrency: int = DEFAULT_CONCURRENCY,
        policy: RetryPolicy | None = None,
        protocol: str = "s3",
        filesystem: Any = None,
        deadline_s: float | None = None,
        endpoints: Sequence[str] = (),
        answered: Collection[str] = (),
    ) -> None:
        """``storage_options``: fsspec's; ``filesystem``: an fsspec filesystem to use instead of
        building one from them.

        ``deadline_s``: a request that has had no answer for that long, its retries included,
        fails with DeadlineExceeded; no retry starts past it. Each attempt's own wait is bounded by
        the client's timeouts (for S3 botocore's connect and read timeouts, set from the deadline
        unless given; for RADOS librados' op timeouts). ``endpoints``: several S3 gateways of one
        store (loaders.storage.SourceSpec.endpoints). ``answered``: endpoints known to have
        answered already (SourceSpec.answered_endpoints): their refusals are an outage to ride
        through from the first request, as are those of an endpoint once it answers here."""
        options = dict(storage_options or {})
        endpoints = list(endpoints)
        self.deadline_s: float | None = float(deadline_s or 0) or None
        if protocol == "s3":
            # our retries only: counted, jittered, bounded
            config = dict(options.get("config_kwargs") or {})
            # botocore's "max_attempts" counts retries (1 would mean two tries); the total is what we want
            config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
            if self.deadline_s:
                config.setdefault("connect_timeout", min(5.0, self.deadline_s))
                config.setdefault("read_timeout", self.deadline_s)
            options["config_kwargs"] = config
            self.attempt_limits = (
                f"connect timeout {config.get('connect_timeout', 60):g} s, "
                f"read timeout {config.get('read_timeout', 60):g} s"
            )
        else:  # rados: librados' own limits (iobench.ceph.connection)
            limits = [
                f"{what} {options[key]:g} s"
                for key, what in (("connect_timeout", "connect timeout"), ("op_timeout", "op timeout"))
                if isinstance(options.get(key), int | float)
            ]
            self.attempt_limits = ", ".join(limits)
        # a fresh instance: fsspec caches filesystems by arguments, which would pin old credentials
        self.fs = filesystem or fsspec.filesystem(protocol, skip_instance_cache=True, **options)
        if protocol == "s3" and filesystem is None:
            self.fs.retries = 1  # s3fs's own retry loop (a class attribute, not a constructor option)
        self._filesystems = [self.fs]
        for url in endpoints[1:] if filesystem is None else []:
            client = {**(options.get("client_kwargs") or {}), "endpoint_url": url}
            fs = fsspec.filesystem(protocol, skip_instance_cache=True, **{**options, "client_kwargs": client})
            fs.retries = 1
            self._filesystems.append(fs)
        self.endpoint = None  # named in error messages
        if filesystem is None:
            client = options.get("client_kwargs") or {}
            self.endpoint = client.get("endpoint_url") or (_env_endpoint() if protocol == "s3" else None)
            if len(self._filesystems) > 1:
                self.endpoint = ", ".join(endpoints)
        # each filesystem's endpoint, as SourceSpec.answered_endpoints names it
        self._names = list(endpoints) if len(endpoints) == len(self._filesystems) else []
        self._names = self._names or [str(self.endpoint or protocol)] * len(self._filesystems)
        self._answered = {i for i, name in enumerate(self._names) if name in answered}
        self._outage = OutageClock()
        self.part_bytes, self.concurrency = part_bytes, max(1, concurrency)
        self.policy = policy or RetryPolicy()
        self.stats = RequestStats()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="iobench-get")
        return self._pool

    def _where(self, what: str, url: str) -> str:
        return f"{what} {url}" + (f" (endpoint {self.endpoint})" if self.endpoint else "")

    def answered_endpoints(self) -> tuple[str, ...]:
        """The endpoints that have answered this reader (or were known to: ``answered``)."""
        with self._lock:
            return tuple(sorted({self._names[i] for i in self._answered}))

    def _call(self, what: str, url: str, fn: Callable[[Any], Any], nbytes: Callable[[Any], int]) -> Any:
        """``fn(fs)`` with counted, jittered retries; with several endpoints, each attempt on the
        next one from the URL's own (SourceSpec.endpoints), a refusing one left for the next at once.

        Refused or reset connections of a store that has answered (an outage: a gateway
        restarting) are retried until the deadline, outside the attempt budget; without a deadline,
        or from a store that never answered, they spend the budget like any fault."""
        last: BaseException | None = None
        t_first = time.monotonic()
        made = spent = refused_in_row = 0  # attempts; those the budget counts; connection faults in a row
        held = False  # this request waits out an outage (counted by the outage clock)
        n = len(self._filesystems)
        first = zlib.crc32(url.encode()) % n if n > 1 else 0
        try:
            while True:
                t0 = time.perf_counter()
                index = (first + made) % n
                made += 1
                if n > 1:
                    with self._lock:
                        self.stats.by_endpoint[index] = self.stats.by_endpoint.get(index, 0) + 1
                try:
                    result = fn(self._filesystems[index])
                except _WriteFailed as failed:  # our disk, not the store: no request fault, no retry
                    raise failed.error from None
                except Exception as exc:
                    kind = classify(exc)
                    outage = kind in OUTAGE_FAULTS and self.deadline_s is not None and bool(self._answered)
                    with self._lock:
                        self.stats.requests += 1
                        if kind is None:
                            self.stats.failures += 1
                        else:
                            self.stats.fault(kind)
                        if kind in ("throttled_or_5xx", "truncated_body"):  # the server spoke HTTP
                            self._answered.add(index)
                        if outage:
                            self.stats.refused_connections += 1
                    if kind is None:
                        # s3fs says only the key of a missing object (or "None"): say what it means
                        detail = "no such bucket or object" if isinstance(exc, FileNotFoundError) else exc
                        raise ObjectStoreError(
                            getattr(exc, "errno", None) or errno.EIO, f"{self._where(what, url)}: {detail}"
                        ) from None
                    last = exc
                    if kind == "connect_timeout" and not self._answered and made >= n:
                        break  # no connection to a store that never answered: a wrong or dead host
                    if outage and not held:
                        self._outage.hold()
                        held = True
                    spent += not outage
                    refused_in_row = refused_in_row + 1 if kind in NO_CONNECTION else 0
                    if spent >= self.policy.attempts:
                        break
                    if refused_in_row % n:
                        delay = 0.0  # another gateway of the store first
                    elif outage:
                        delay = self.policy.delay(refused_in_row // n - 1, self.policy.outage_max_delay_s)
                    else:
                        delay = self.policy.delay(spent - 1)
                    if self._past_deadline(t_first, delay):
                        break
                    with self._lock:
                        self.stats.retries += 1
                    time.sleep(delay)
                    continue
                with self._lock:
                    self.stats.record(time.perf_counter() - t0, nbytes(result))
                    self._answered.add(index)
                return result
        finally:
            if held:
                lost = self._outage.release()
                with self._lock:
                    self.stats.outage_s += lost
        with self._lock:
            self.stats.failures += 1
        detail = f"last error: {_describe(last)}"
        kind = classify(last) if last is not None else None
        if kind == "connect_timeout" and not self._answered:
            raise DeadlineExceeded(errno.ETIMEDOUT, self._no_connection(what, url, t_first, detail))
        if held and kind in OUTAGE_FAULTS:
            raise ObjectStoreError(errno.ECONNREFUSED, self._outlasted(what, url, t_first, made, detail))
        if spent < self.policy.attempts or kind in ("timeout", "connect_timeout"):
            raise DeadlineExceeded(errno.ETIMEDOUT, self._timed_out(what, url, t_first, made, detail))
        raise ObjectStoreError(errno.EIO, self._gave_up(what, url, t_first, detail))

    def _past_deadline(self, since: float, delay: float = 0.0) -> bool:
        """True when a retry after ``delay`` would start past the deadline."""
        return self.deadline_s is not None and time.monotonic() - since + delay >= self.deadline_s

    def _gave_up(self, what: str, url: str, since: float, detail: str) -> str:
        p = self.policy
        limits = f"; each attempt: {self.attempt_limits}" if self.attempt_limits else ""
        return (
            f"{self._where(what, url)}: gave up after {p.attempts} attempts in "
            f"{time.monotonic() - since:.1f} s (retry budget: {p.attempts} attempts, backoff up to "
            f"{p.max_delay_s:g} s{limits}), {detail}"
        )

    def _outlasted(self, what: str, url: str, since: float, made: int, detail: str) -> str:
        """The message of an outage longer than the deadline: the store had answered, then refused."""
        return (
            f"{self._where(what, url)}: the store answered earlier, then refused or reset connections "
            f"until the {self.deadline_s:g} s deadline ({made} attempts in {time.monotonic() - since:.1f} s, "
            f"backoff up to {self.policy.outage_max_delay_s:g} s): down, or a restart longer than the "
            f"deadline; {detail}"
        )

    def _no_connection(self, what: str, url: str, since: float, detail: str) -> str:
        """The message of a store that never answered and took no connection within the timeout."""
        return (
            f"{self._where(what, url)}: no connection within the connect timeout, and the endpoint has not "
            f"answered before (a wrong endpoint, or a host that drops connections?): 1 attempt in "
            f"{time.monotonic() - since:.1f} s (each attempt: {self.attempt_limits}), {detail}"
        )

    def _timed_out(self, what: str, url: str, since: float, made: int, detail: str) -> str:
        """The message of a request that had no answer: the deadline, the attempts and their limits."""
        p = self.policy
        deadline = f"the {self.deadline_s:g} s deadline" if self.deadline_s else "the client's timeouts"
        limits = f"each attempt: {self.attempt_limits}; " if self.attempt_limits else ""
        return (
            f"{self._where(what, url)}: no answer within {deadline}: {made} attempt"
            f"{'s' if made != 1 else ''} in {time.monotonic() - since:.1f} s ({limits}retry budget: "
            f"{p.attempts} attempts, backoff up to {p.max_delay_s:g} s, none started past the deadline), "
            f"{detail}"
        )

    def take_stats(self) -> RequestStats:
        """The counters since the last call; the reader starts new ones (per-batch accounting)."""
        with self._lock:
            stats, self.stats = self.stats, RequestStats()
        return stats

    def info(self, url: str) -> dict:
        """Size and ETag (HEAD)."""
        info = self._call("HEAD", url, lambda fs: fs.info(url), lambda _: 0)
        return {
            "size": int(info["size"]),
            "etag": (info.get("ETag") or info.get("etag") or "").strip('"') or None,
        }

    def read_range(self, url: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object, exactly (see _range), in memory."""
        parts: list[bytes] = []

        def get(fs: Any, at: int) -> int:
            parts.append(fs.cat_file(url, start=at, end=end))  # one body, read whole: one copy
            return len(parts[-1])

        self._range(url, start, end, get)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _range(self, url: str, start: int, end: int, get: Callable[[Any, int], int]) -> None:
        """Bytes [start, end) of the object through ``get(fs, at)``, which GETs [at, end), hands the
        bytes on and says how many came: exactly, for a short body is a fault like any other and
        the rest is fetched rather than a torn range handed on. Up to ``attempts`` short bodies per
        range; each of those GETs has its own ``attempts`` for errors (so a range costs at most
        attempts² requests)."""
        pos, t_first = start, time.monotonic()
        for attempt in range(self.policy.attempts):
            if attempt and self._past_deadline(t_first):
                raise DeadlineExceeded(
                    errno.ETIMEDOUT,
                    self._timed_out(
                        "GET",
                        url,
                        t_first,
                        attempt,
                        f"the bodies stopped short: {pos - start} of {end - start} bytes",
                    ),
                )
            pos += self._call("GET", url, lambda fs, at=pos: get(fs, at), int)
            if pos >= end:
                if pos > end:
                    raise ObjectStoreError(
                        errno.EIO,
                        f"{self._where('GET', url)}: asked for bytes {start}-{end}, got {pos - start}: "
                        "the server ignored the Range header",
                    )
                return
            with self._lock:
                self.stats.fault("truncated_body")
                if attempt + 1 == self.policy.attempts:
                    self.stats.failures += 1
                    break
                self.stats.retries += 1
            time.sleep(self.policy.delay(attempt))
        raise ObjectStoreError(
            errno.EIO,
            self._gave_up(
                "GET",
                url,
                t_first,
                f"the bodies stopped short: {pos - start} of {end - start} bytes "
                "(is the object shorter than the manifest says?)",
            ),
        )

    def _ranges(self, size: int) -> list[tuple[int, int]]:
        return [(s, min(size, s + self.part_bytes)) for s in range(0, size, self.part_bytes)] or [(0, 0)]

    def download(self, url: str, out: BinaryIO, size: int | None = None) -> int:
        """Write the whole object to ``out`` with up to ``concurrency`` ranged GETs in flight.

        Into a real file each GET's body is written where it belongs as it arrives (``pwrite``),
        never held whole in memory and copied again: the cache's cold epoch costs what a plain
        download does (benchmarks/bench_cache.py). ``out`` is left positioned after the object."""
        size = self.info(url)["size"] if size is None else size
        try:
            fd = out.fileno()
        except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError: in memory
            fd = None
        if fd is None:
            for chunk in self._ordered(url, self._ranges(size)):
                out.write(chunk)
            return size
        out.flush()
        base = out.tell()
        self._download_into(url, fd, base, self._ranges(size))
        out.seek(base + size)
        return size

    def _download_into(self, url: str, fd: int, base: int, ranges: list[tuple[int, int]]) -> None:
        """Every range GET into the file at ``base`` + its offset; all of them have ended (done,
        failed or never started) before this returns, so none writes to the descriptor later."""
        stop = threading.Event()

        def write(at: int, chunk: bytes) -> None:
            view = memoryview(chunk)
            try:
                while view:
                    n = os.pwrite(fd, view, base + at)
                    view, at = view[n:], at + n
            except OSError as exc:
                raise _WriteFailed(exc) from None

        def one(start: int, end: int) -> None:
            if not stop.is_set():
                self._range(url, start, end, lambda fs, at: _get_into(fs, url, at, end, write))

        if len(ranges) == 1:
            one(*ranges[0])
            return
        futures = [self._executor().submit(one, *r) for r in ranges]
        try:
            for f in futures:
                f.result()
        except BaseException:
            stop.set()  # the ranges not yet started give up; those running end on their own
            wait(futures)
            raise

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


class _WriteFailed(Exception):
    """Writing a body to the local file failed (a full disk): the caller's error, not a fault of
    the store, so it passes through the retries as the OSError it carries."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


STREAM_CHUNK = 2**20


def _get_into(fs: Any, url: str, start: int, end: int, write: Callable[[int, bytes], None]) -> int:
    """One GET of bytes [start, end), each piece handed to ``write(offset, bytes)`` as it arrives;
    the number of bytes that came. An S3 body is streamed (s3fs' own client, as its get_file
    does); other stores' reads come whole. A server that ignores the Range is cut short past
    ``end`` (the caller sees the overrun)."""
    if end <= start:
        return 0
    if not hasattr(fs, "_call_s3"):
        data = fs.cat_file(url, start=start, end=end)
        write(start, data)
        return len(data)
    bucket, key, version = fs.split_path(url)

    async def get() -> int:
        version_kw = {"VersionId": version} if version else {}
        response = await fs._call_s3(
            "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **version_kw
        )
        body, at = response["Body"], start
        try:
            while chunk := await body.read(STREAM_CHUNK):
                if at < end:  # never past the range, into the next one's bytes
                    write(at, chunk[: end - at])
                at += len(chunk)
                if at > end:
                    break
        finally:
            body.close()
        return at - start

    return fsspec.asyn.sync(fs.loop, get)


def _env_endpoint() -> str | None:
    # where botocore sends requests when no endpoint_url is given (AWS_ENDPOINT_URL and its S3 form)
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


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
