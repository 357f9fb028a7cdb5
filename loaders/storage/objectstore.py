"""Reading objects from S3-compatible stores: concurrent ranged GETs, bounded retries, counters.

The requests go through an object client chosen by name (loaders/storage/clients/: s3fs, the MinIO
SDK, s3torchconnector, obstore, s3dlio; fsspec for ``rados://``), each making one attempt per call
with its own retries turned off where they can be, so that every request, retry and failure is
ours to count whatever the client. Retries back off exponentially with full jitter; errors that
retrying cannot fix (wrong credentials, missing bucket or key) fail at once with the URL in the
message. A store that has answered and then refuses or resets connections (a gateway restarting)
is retried until the deadline instead of within the attempt budget (loaders/storage/outage.py); one
that never answered fails fast.
"""

from __future__ import annotations

import concurrent.futures
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
from dataclasses import asdict, dataclass, field
from typing import Any, BinaryIO

from loaders.observe.counters import FaultKind, RequestCounts
from loaders.storage.clients import (
    DEFAULT_CLIENT,
    ClientChoice,
    ResolvedClient,
    make_client,
    resolve_client,
    threadcpu,
)
from loaders.storage.clients.base import ClientSettings, ObjectClient
from loaders.storage.clients.fsspec_client import FsspecClient
from loaders.storage.deadline import helper_threads
from loaders.storage.faults import DeadlineExceeded, ObjectStoreError, classify, exception_chain
from loaders.storage.outage import OUTAGE_FAULTS, OutageClock
from loaders.storage.spec import DEFAULT_CONCURRENCY, DEFAULT_PART_BYTES

__all__ = [
    "DeadlineExceeded",
    "ObjectReader",
    "ObjectStoreError",
    "RetryPolicy",
    "classify",
    "exception_chain",
]

NO_CONNECTION = OUTAGE_FAULTS | {"connect_timeout"}  # faults after which another gateway is tried at once
LATENCY_SAMPLE = 4096
ATTEMPT_THREADS = 256  # helper threads waiting on attempts of clients without a read timeout


@dataclass
class RequestStats:
    """This reader's request counts and a bounded sample of its requests' latencies, since the
    last take (the counts go into a StageStats, the latencies into its sample)."""

    counts: RequestCounts = field(default_factory=RequestCounts)
    latencies_ms: list[float] = field(default_factory=list)  # a bounded sample

    def record(self, seconds: float, nbytes: int) -> None:
        self.counts.requests += 1
        self.counts.bytes_transferred += nbytes
        if len(self.latencies_ms) < LATENCY_SAMPLE:
            self.latencies_ms.append(seconds * 1000.0)
        else:  # reservoir sampling keeps the sample unbiased over long runs
            j = random.randrange(self.counts.requests)
            if j < LATENCY_SAMPLE:
                self.latencies_ms[j] = seconds * 1000.0

    def as_dict(self) -> dict[str, Any]:
        import numpy as np

        lat = np.asarray(self.latencies_ms) if self.latencies_ms else None
        pct = (
            dict(zip(("p50", "p95", "p99"), np.percentile(lat, [50, 95, 99]).tolist(), strict=True))
            if lat is not None
            else {}
        )
        return {**asdict(self.counts), "latency_ms": pct}


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
        client: ClientChoice = DEFAULT_CLIENT,
        part_bytes: int = DEFAULT_PART_BYTES,
        concurrency: int = DEFAULT_CONCURRENCY,
        policy: RetryPolicy | None = None,
        protocol: str = "s3",
        filesystem: Any = None,
        deadline_s: float | None = None,
        endpoints: Sequence[str] = (),
        answered: Collection[str] = (),
    ) -> None:
        """``storage_options``: fsspec's (for S3, s3fs's form: every client reads its endpoint,
        region, addressing style, profile and timeouts from them); ``client``: the S3 client by
        name (loaders.storage.clients; "auto": the best measured one installed); ``filesystem``:
        an fsspec filesystem to read through instead.

        ``deadline_s``: a request that has had no answer for that long, its retries included,
        fails with DeadlineExceeded; no retry starts past it. Each attempt's own wait is bounded by
        the client's timeouts (for S3 connect and read timeouts set from the deadline unless given;
        for RADOS librados' op timeouts), or, for a client without a read timeout, by the deadline
        itself. ``endpoints``: several S3 gateways of one store (loaders.storage.SourceSpec.endpoints).
        ``answered``: endpoints known to have answered already (SourceSpec.answered_endpoints): their
        refusals are an outage to ride through from the first request, as are those of an endpoint
        once it answers here."""
        options = dict(storage_options or {})
        endpoints = list(endpoints)
        self.deadline_s: float | None = float(deadline_s or 0) or None
        self.part_bytes, self.concurrency = part_bytes, max(1, concurrency)
        connections = max(self.concurrency, 16)
        if protocol == "s3":
            config = dict(options.get("config_kwargs") or {})
            if self.deadline_s:
                config.setdefault("connect_timeout", min(5.0, self.deadline_s))
                config.setdefault("read_timeout", self.deadline_s)
            options["config_kwargs"] = config
        # the client's name, as the tier's description says it (fsspec is the s3fs entry's class)
        self.client: ResolvedClient = "s3fs"
        if protocol == "s3" and filesystem is None:
            self.client = resolve_client(
                client, keys=bool(options.get("key")), profile=bool(options.get("profile"))
            )
            self._clients: list[ObjectClient] = [
                make_client(
                    self.client,
                    ClientSettings.from_storage_options(
                        options, url, part_bytes=part_bytes, connections=connections
                    ),
                )
                for url in endpoints or (None,)
            ]
            self.endpoint = ", ".join(endpoints) if len(endpoints) > 1 else self._clients[0].endpoint
        else:
            settings = ClientSettings(storage_options=options, part_bytes=part_bytes, connections=connections)
            self._clients = [FsspecClient(settings, protocol=protocol, filesystem=filesystem)]
            self.endpoint = None
        self.attempt_limits = self._clients[0].attempt_limits
        # each client's endpoint, as SourceSpec.answered_endpoints names it
        self._names = list(endpoints) if len(endpoints) == len(self._clients) else []
        self._names = self._names or [str(self.endpoint or protocol)] * len(self._clients)
        self._answered = {i for i, name in enumerate(self._names) if name in answered}
        self._outage = OutageClock()
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

    def _call(
        self, what: str, url: str, fn: Callable[[ObjectClient], Any], nbytes: Callable[[Any], int]
    ) -> Any:
        """``fn(client)`` with counted, jittered retries; with several endpoints, each attempt on the
        next one from the URL's own (SourceSpec.endpoints), a refusing one left for the next at once.

        Refused or reset connections of a store that has answered (an outage: a gateway
        restarting) are retried until the deadline, outside the attempt budget; without a deadline,
        or from a store that never answered, they spend the budget like any fault."""
        last: BaseException | None = None
        last_client = self._clients[0]
        t_first = time.monotonic()
        made = spent = refused_in_row = 0  # attempts; those the budget counts; connection faults in a row
        held = False  # this request waits out an outage (counted by the outage clock)
        n = len(self._clients)
        first = zlib.crc32(url.encode()) % n if n > 1 else 0
        try:
            while True:
                t0 = time.perf_counter()
                index = (first + made) % n
                made += 1
                if n > 1:
                    with self._lock:
                        self.stats.counts.by_endpoint[index] = self.stats.counts.by_endpoint.get(index, 0) + 1
                client = self._clients[index]
                try:
                    result = self._attempt(client, fn, t_first)
                except _WriteFailed as failed:  # our disk, not the store: no request fault, no retry
                    raise failed.error from None
                except Exception as exc:
                    kind, outage = self._count_fault(client, index, exc)
                    if kind is None:
                        # s3fs says only the key of a missing object (or "None"): say what it means
                        detail = (
                            "no such bucket or object"
                            if isinstance(exc, FileNotFoundError)
                            else client.describe(exc)
                        )
                        raise ObjectStoreError(
                            getattr(exc, "errno", None) or errno.EIO, f"{self._where(what, url)}: {detail}"
                        ) from None
                    last, last_client = exc, client
                    if kind == "connect_timeout" and not self._answered and made >= n:
                        break  # no connection to a store that never answered: a wrong or dead host
                    if outage and not held:
                        self._outage.hold()
                        held = True
                    spent += not outage
                    refused_in_row = refused_in_row + 1 if kind in NO_CONNECTION else 0
                    if spent >= self.policy.attempts:
                        break
                    delay = self._backoff(refused_in_row, spent, outage)
                    if self._past_deadline(t_first, delay):
                        break
                    with self._lock:
                        self.stats.counts.retries += 1
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
                    self.stats.counts.outage_s += lost
        with self._lock:
            self.stats.counts.failures += 1
        detail = f"last error: {last_client.describe(last) if last is not None else 'none'}"
        kind = last_client.classify(last) if last is not None else None
        if kind == "connect_timeout" and not self._answered:
            raise DeadlineExceeded(errno.ETIMEDOUT, self._no_connection(what, url, t_first, detail))
        if held and kind in OUTAGE_FAULTS:
            raise ObjectStoreError(errno.ECONNREFUSED, self._outlasted(what, url, t_first, made, detail))
        if spent < self.policy.attempts or kind in ("timeout", "connect_timeout"):
            raise DeadlineExceeded(errno.ETIMEDOUT, self._timed_out(what, url, t_first, made, detail))
        raise ObjectStoreError(errno.EIO, self._gave_up(what, url, t_first, detail))

    def _count_fault(
        self, client: ObjectClient, index: int, exc: BaseException
    ) -> tuple[FaultKind | None, bool]:
        """A failed attempt on endpoint ``index`` counted: its fault kind (None: no retry mends it) and
        whether it is part of an outage (a refused or reset connection of a store that has answered,
        with a deadline to wait it out by)."""
        kind = client.classify(exc)
        outage = kind in OUTAGE_FAULTS and self.deadline_s is not None and bool(self._answered)
        with self._lock:
            self.stats.counts.requests += 1
            if kind is None:
                self.stats.counts.failures += 1
            else:
                self.stats.counts.fault(kind)
                self.stats.counts.client_retries += client.hidden_retries_per_fault
            if kind in ("throttled_or_5xx", "truncated_body"):  # the server spoke HTTP
                self._answered.add(index)
            if outage:
                self.stats.counts.refused_connections += 1
        return kind, outage

    def _backoff(self, refused_in_row: int, spent: int, outage: bool) -> float:
        """The wait before the next attempt: none where another gateway of the store is next."""
        n = len(self._clients)
        if refused_in_row % n:
            return 0.0
        if outage:
            return self.policy.delay(refused_in_row // n - 1, self.policy.outage_max_delay_s)
        return self.policy.delay(spent - 1)

    def _attempt(self, client: ObjectClient, fn: Callable[[ObjectClient], Any], since: float) -> Any:
        """One attempt, ``fn(client)``, its CPU on the thread that runs it counted as the client's.
        A client whose own timeouts do not bound an attempt runs it on a helper thread, waited for
        until the deadline (counted from ``since``); one that passes it is left running there."""

        def run() -> Any:
            cpu = time.thread_time()
            try:
                return fn(client)
            finally:
                spent = time.thread_time() - cpu
                with self._lock:
                    self.stats.counts.client_cpu_s += spent

        if client.bounds_attempts or self.deadline_s is None:
            return run()
        future = helper_threads("iobench-attempt", ATTEMPT_THREADS).submit(run)
        try:
            return future.result(max(0.0, self.deadline_s - (time.monotonic() - since)))
        except concurrent.futures.TimeoutError:
            raise TimeoutError(
                f"{self.client} gave no answer within the {self.deadline_s:g} s deadline (the attempt is "
                "left running on a helper thread)"
            ) from None

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
        """The counters since the last call; the reader starts new ones (per-batch accounting). The
        client's I/O threads' CPU since the last take is added to its calling threads'."""
        threads = set().union(*(client.thread_ids() for client in self._clients))
        with self._lock:
            stats, self.stats = self.stats, RequestStats()
        stats.counts.client_cpu_s += threadcpu.take(threads)
        return stats

    def info(self, url: str) -> dict:
        """Size and ETag (HEAD)."""
        size, etag = self._call("HEAD", url, lambda client: client.head(url), lambda _: 0)
        return {"size": size, "etag": etag}

    def read_range(self, url: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object, exactly (see _range), in memory."""
        data = self.read_view(url, start, end)
        return data if isinstance(data, bytes) else bytes(data)

    def read_view(self, url: str, start: int, end: int) -> bytes | memoryview:
        """As read_range, in the buffer the client returned: bytes, or a view of the client's own
        (no copy), as a shard's stream reads its parts."""
        parts: list[bytes | memoryview] = []

        def get(client: ObjectClient, at: int) -> int:
            parts.append(client.get(url, at, end))  # one body, read whole: one copy
            return len(parts[-1])

        self._range(url, start, end, get)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _range(self, url: str, start: int, end: int, get: Callable[[ObjectClient, int], int]) -> None:
        """Bytes [start, end) of the object through ``get(client, at)``, which GETs [at, end), hands the
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

            def get_rest(client: ObjectClient, at: int = pos) -> int:  # from this attempt's start, bound now
                return get(client, at)

            pos += self._call("GET", url, get_rest, int)
            if pos >= end:
                if pos > end:
                    raise ObjectStoreError(
                        errno.EIO,
                        f"{self._where('GET', url)}: asked for bytes {start}-{end}, got {pos - start}: "
                        "the server ignored the Range header",
                    )
                return
            with self._lock:
                self.stats.counts.fault("truncated_body")
                if attempt + 1 == self.policy.attempts:
                    self.stats.counts.failures += 1
                    break
                self.stats.counts.retries += 1
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

    def _ranges(self, size: int, start: int = 0) -> list[tuple[int, int]]:
        return [(s, min(size, s + self.part_bytes)) for s in range(start, size, self.part_bytes)] or [(0, 0)]

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
        failed or never started) before this returns, and no write reaches the descriptor after
        it: an attempt left running past the deadline (a client without a read timeout) is shut
        out by the gate."""
        stop = threading.Event()
        gate = _WriteGate(fd, base)

        def one(start: int, end: int) -> None:
            if not stop.is_set():
                self._range(url, start, end, lambda client, at: client.get_into(url, at, end, gate.write))

        try:
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
        finally:
            gate.close()

    def _ordered(self, url: str, ranges: list[tuple[int, int]]):
        """Yield the ranges' bytes in order, keeping ``concurrency`` GETs in flight ahead of the reader."""
        pool = self._executor()
        pending: deque[Future] = deque()
        todo = iter(ranges)
        for start, end in todo:
            pending.append(pool.submit(self.read_view, url, start, end))
            if len(pending) >= self.concurrency:
                break
        while pending:
            chunk = pending.popleft().result()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append(pool.submit(self.read_view, url, *nxt))
            yield chunk

    def open_stream(
        self, url: str, size: int | None = None, start: int = 0, end: int | None = None
    ) -> BinaryIO:
        """A read-only stream of the object (of its bytes [start, end) when given) with
        read-ahead; no local copy is made."""
        if end is None:
            end = self.info(url)["size"] if size is None else size
        return _ChunkStream(self._ordered(url, self._ranges(end, start)))  # type: ignore[return-value]  # a file-like object: typing.BinaryIO is a class, not a protocol it could meet

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        for client in self._clients:
            client.close()


class _WriteFailed(Exception):
    """Writing a body to the local file failed (a full disk): the caller's error, not a fault of
    the store, so it passes through the retries as the OSError it carries."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _WriteGate:
    """Writes of a download's bodies into its file, each where it belongs (``pwrite``), until the
    download ends: then the gate closes, waiting for writes under way, and a write that comes later
    (from an attempt abandoned at the deadline) fails instead of reaching a descriptor the cache
    has closed, whose number may be another file's by then."""

    def __init__(self, fd: int, base: int) -> None:
        self.fd, self.base = fd, base
        self._cond = threading.Condition()
        self._open, self._writing = True, 0

    def write(self, at: int, chunk: Any) -> None:
        with self._cond:
            if not self._open:
                raise _WriteFailed(OSError(errno.ECANCELED, "the download this body belongs to ended"))
            self._writing += 1
        view = memoryview(chunk)
        try:
            while view:
                n = os.pwrite(self.fd, view, self.base + at)
                view, at = view[n:], at + n
        except OSError as exc:
            raise _WriteFailed(exc) from None
        finally:
            with self._cond:
                self._writing -= 1
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._open = False
            self._cond.wait_for(lambda: self._writing == 0)


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
