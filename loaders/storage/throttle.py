"""A throttled storage link: a bandwidth cap shared by every reader on the host, plus a fixed
latency per request.

Why: on a host where JPEG decode is the bottleneck, no real tier is slow enough to make the fetch
stage the limit. Throttling a fast tier creates fetch-bound cases on demand, so the stall
attribution can be checked against a known answer.

Bandwidth. The cap is the *aggregate* rate of all readers on the host, like a real device or
link: DataLoader workers are separate processes, so the bucket lives in a small state file that
every process updates under ``fcntl.flock``. The algorithm is GCRA (virtual scheduling): the file
holds one little-endian float64, the virtual time at which every byte charged so far will have
drained at ``bytes_per_s``. Charging ``n`` bytes moves it to ``max(vt, now) + n / rate``; the
caller then sleeps until ``vt - burst_bytes / rate``. So the bytes returned by time ``t`` never
exceed ``rate * (t - t0) + burst_bytes``. The lock is held for one read and one write of 8 bytes;
the sleep happens after it is released, so readers never queue behind a sleeper.

Clock. ``time.monotonic()`` is CLOCK_MONOTONIC, one clock for the whole system on Linux, so the
virtual times written by different processes compare. (A container in its own *time namespace*
sees an offset monotonic clock: share a bucket only between processes of one namespace.) A value
more than an hour ahead of now can only come from an earlier boot and is ignored.

Latency. ``latency_s`` is charged once per *request*: once per opened shard or object stream
(time to first byte), once per whole-object read, once per shard downloaded into a cache. It is
a plain sleep outside any lock, so concurrent requests overlap their latencies as network round
trips do; it adds no bandwidth. With ``latency_p99_s`` each request's latency is drawn from a
lognormal distribution whose median is ``latency_s`` and whose 99th percentile is
``latency_p99_s`` (sigma = ln(p99 / p50) / 2.3263, 2.3263 being the standard normal's 99th
percentile): the tail that object stores and networks have, and that a synchronous job pays at
every step on whichever rank drew it. Each process draws from its own generator, seeded afresh
(also after a fork), so ranks and workers draw independently.

Charging happens after a read returns, on the bytes actually returned, so a caller that times its
reads (the tar reader's fetch time) sees the throttle as fetch time.
"""

from __future__ import annotations

import fcntl
import math
import os
import random
import struct
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Protocol, cast

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

from loaders.observe.counters import ThrottleCounts

__all__ = ["Throttle", "ThrottleSpec", "ThrottledFile", "default_burst"]

MIN_BURST_BYTES = 256 * 2**10
Z99 = 2.3263478740408408  # the standard normal's 99th percentile
BURST_SECONDS = 0.020
STALE_AHEAD_S = 3600.0
_STATE = struct.Struct("<d")


def default_burst(bytes_per_s: float | None) -> int:
    """The bucket depth: 20 ms of bandwidth, at least 256 KiB.

    20 ms absorbs sleep overshoot and scheduler delays of a busy host (a few ms), which would
    otherwise be lost capacity, while the excess it allows over any measurement of seconds stays
    under a few per cent. The 256 KiB floor lets one ~110 KB sample with its tar headers pass
    without a stall at low caps, as one request would from a real device.
    """
    if bytes_per_s is None:
        return MIN_BURST_BYTES
    return max(MIN_BURST_BYTES, int(BURST_SECONDS * bytes_per_s))


@dataclass(frozen=True, kw_only=True)
class ThrottleSpec:
    """Picklable settings of a throttle. ``bytes_per_s=None`` caps no bandwidth (latency only);
    ``burst_bytes=0`` picks :func:`default_burst`. ``state_path`` is the shared bucket file; it is
    created if absent (its directory must exist)."""

    bytes_per_s: float | None
    state_path: str
    latency_s: float = 0.0
    burst_bytes: int = 0
    latency_p99_s: float | None = None  # with it, latencies are lognormal: median latency_s, this p99

    def __post_init__(self) -> None:
        if self.bytes_per_s is not None and not self.bytes_per_s > 0:
            raise ValueError(f"bytes_per_s={self.bytes_per_s!r}: must be > 0, or None for no cap")
        if not self.latency_s >= 0:
            raise ValueError(f"latency_s={self.latency_s!r}: must be >= 0 seconds")
        if self.latency_p99_s is not None and not self.latency_p99_s >= self.latency_s > 0:
            raise ValueError(
                f"latency_p99_s={self.latency_p99_s!r}: must be >= the median latency_s={self.latency_s!r} > 0"
            )
        if self.burst_bytes < 0:
            raise ValueError(f"burst_bytes={self.burst_bytes!r}: must be >= 0 (0 = default)")
        if not self.state_path:
            raise ValueError("state_path: give the file that holds the shared bucket state")
        if self.burst_bytes == 0:
            object.__setattr__(self, "burst_bytes", default_burst(self.bytes_per_s))


@dataclass
class ThrottleStats:
    """What one process's throttle did: seconds slept for bandwidth and for latency (summed over
    threads, so they may exceed wall time), requests started, bytes charged."""

    bandwidth_wait_s: float = 0.0
    latency_wait_s: float = 0.0
    requests: int = 0
    bytes: int = 0


_LIVE: weakref.WeakSet[Throttle] = weakref.WeakSet()


class Throttle:
    """One process's handle on a shared bucket. Thread-safe; survives fork (the child reopens the
    state file, because flock is per open file description and a shared one would not exclude)."""

    def __init__(self, spec: ThrottleSpec) -> None:
        self.spec = spec
        self._reset()
        _LIVE.add(self)

    def __reduce__(self):  # a handle travels as its settings; descriptors do not
        return (Throttle, (self.spec,))

    def _reset(self) -> None:
        self._fd: int | None = None
        self._lock = threading.Lock()
        self.stats = ThrottleStats()
        self._carried_ms: dict[str, float] = {}
        self._rng = random.Random(int.from_bytes(os.urandom(8), "little"))  # independent per process

    def latency(self) -> float:
        """One request's latency: the fixed one, or a lognormal draw with the spec's p50 and p99."""
        p50, p99 = self.spec.latency_s, self.spec.latency_p99_s
        if p99 is None or p99 == p50:
            return p50
        with self._lock:
            return self._rng.lognormvariate(math.log(p50), math.log(p99 / p50) / Z99)

    def request(self) -> None:
        """Start a request: count it and sleep the latency (overlapping other requests)."""
        slept = _sleep(self.latency())
        with self._lock:
            self.stats.requests += 1
            self.stats.latency_wait_s += slept

    def charge(self, nbytes: int) -> None:
        """Account ``nbytes`` just read; sleep until the shared bucket allows them."""
        if nbytes <= 0:
            return
        rate = self.spec.bytes_per_s
        if rate is None:
            with self._lock:
                self.stats.bytes += nbytes
            return
        slept = _sleep(self._reserve(nbytes, float(rate)))
        with self._lock:
            self.stats.bytes += nbytes
            self.stats.bandwidth_wait_s += slept

    def _reserve(self, nbytes: int, rate: float) -> float:
        """Advance the shared virtual time at ``rate`` bytes/s; return how long this caller must wait."""
        # flock excludes other processes only: threads share this process's descriptor
        with self._lock:
            fd = self._state_fd()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = time.monotonic()
                raw = os.pread(fd, _STATE.size, 0)
                vt = _STATE.unpack(raw)[0] if len(raw) == _STATE.size else 0.0
                if vt > now + STALE_AHEAD_S:
                    vt = 0.0
                vt = max(vt, now) + nbytes / rate
                os.pwrite(fd, _STATE.pack(vt), 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        return vt - self.spec.burst_bytes / rate - now

    def _state_fd(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.spec.state_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise OSError(
                    exc.errno,
                    f"throttle state file {self.spec.state_path!r} cannot be opened: {exc.strerror}",
                ) from None
        return self._fd

    def take_counters(self) -> ThrottleCounts | None:
        """The counts since the last call, waits in whole milliseconds (sub-ms remainders carry
        over, so many small drains do not round the waits away); None when all are zero.

        None then: a reader drains its storage counters into every batch it makes, and a batch
        with counters but no samples still goes to the consumer (so they are not lost). Zeros
        from a link that did nothing made such a batch on every call once a reader's share was
        read, so its stream never ended and the epoch never closed."""
        with self._lock:
            s = self.stats
            waits = {}
            for name, seconds in (("wait_ms", s.bandwidth_wait_s), ("latency_ms", s.latency_wait_s)):
                ms = seconds * 1000 + self._carried_ms.get(name, 0.0)
                waits[name] = int(ms)
                self._carried_ms[name] = ms - int(ms)
            self.stats = ThrottleStats()
        counts = ThrottleCounts(requests=s.requests, bytes=s.bytes, **waits)
        return counts if counts != ThrottleCounts() else None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _sleep(seconds: float) -> float:
    if seconds <= 0:
        return 0.0
    t0 = time.perf_counter()
    time.sleep(seconds)
    return time.perf_counter() - t0


def _after_fork_in_child() -> None:
    if not _LIVE:  # the common case: allocate nothing in a child that uses no throttle
        return
    for throttle in list(_LIVE):
        if throttle._fd is not None:
            os.close(throttle._fd)  # the parent's lock lives on in the parent's descriptor
        throttle._reset()


os.register_at_fork(after_in_child=_after_fork_in_child)


class _Buffered(Protocol):
    """The reads a buffered file (io.BufferedReader) has beyond BinaryIO's."""

    def read1(self, size: int = -1, /) -> bytes: ...
    def readall(self) -> bytes: ...
    def readinto(self, buffer: WriteableBuffer, /) -> int | None: ...
    def readinto1(self, buffer: WriteableBuffer, /) -> int | None: ...


class ThrottledFile:
    """A binary stream whose reads are charged to a :class:`Throttle` by the bytes they return.
    Everything else (seek, tell, seekable, close, name ...) passes through. The buffered reads
    (read1, readall, readinto, readinto1) are the wrapped file's own: a file without them raises
    AttributeError, as it would unwrapped."""

    def __init__(self, raw: BinaryIO, throttle: Throttle) -> None:
        self._raw, self._throttle = raw, throttle

    def _charged(self, data: bytes) -> bytes:
        if data:
            self._throttle.charge(len(data))
        return data

    def read(self, size: int = -1) -> bytes:
        return self._charged(self._raw.read(size))

    def read1(self, size: int = -1) -> bytes:
        return self._charged(cast(_Buffered, self._raw).read1(size))

    def readline(self, size: int = -1) -> bytes:
        return self._charged(self._raw.readline(size))

    def readall(self) -> bytes:
        return self._charged(cast(_Buffered, self._raw).readall())

    def readinto(self, buffer: WriteableBuffer) -> int | None:
        n = cast(_Buffered, self._raw).readinto(buffer)
        self._throttle.charge(n or 0)
        return n

    def readinto1(self, buffer: WriteableBuffer) -> int | None:
        n = cast(_Buffered, self._raw).readinto1(buffer)
        self._throttle.charge(n or 0)
        return n

    def __iter__(self):
        return iter(self.readline, b"")

    def __getattr__(self, name: str):
        if name == "_raw":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._raw, name)

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> ThrottledFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
