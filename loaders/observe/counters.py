"""What a loader counted besides samples and stage times: its object-store requests, its shard
cache, the throttled link, the regions of shards skipped as damaged, and a few of the pipeline's
own counts. Typed groups, summed across batches, workers and ranks as a Counter was.

A group is None until something of it was counted (no object-store reader, no cache, nothing
lost): "none" and "zero" are different findings (a file tier has no request count, an object tier
that read everything from its cache has zero requests). Summing treats None as nothing.

On disk (summary.json, a rank's results) the counters keep the flat names they have always had
(``requests``, ``fault_timeout``, ``endpoint_0_requests``, ``cache_hits``, ``lost_bytes``, ...):
:meth:`LoaderCounters.as_flat` writes them and :meth:`LoaderCounters.from_flat` reads them back, a
group being there when any of its names is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self, get_args

# the fault kinds a retry can mend (loaders/storage/faults.py tells them from the clients' errors)
FaultKind = Literal[
    "throttled_or_5xx",  # the server answered 503 SlowDown or a 5xx
    "truncated_body",  # the body stopped short
    "connection_reset",
    "connect_timeout",  # no TCP connection at all
    "timeout",  # no answer in time
    "connect_failed",  # refused or unreachable
    "io_error",
]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)


@dataclass
class Summed:
    """A record of counts: ``merge`` adds another's into it, field by field (numbers are added,
    mappings per key, a group that is None takes a copy of the other's)."""

    # the flat name of each number field, as summaries carry it
    FLAT: ClassVar[dict[str, str]] = {}

    def merge(self, other: Self) -> None:
        for f in dataclasses.fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if theirs is None:
                continue
            if isinstance(theirs, dict):
                for key, n in theirs.items():
                    mine[key] = mine.get(key, 0) + n
            elif mine is None:
                setattr(self, f.name, theirs.copy() if isinstance(theirs, Summed) else theirs)
            elif isinstance(mine, Summed):
                mine.merge(theirs)
            else:
                setattr(self, f.name, mine + theirs)

    def copy(self) -> Self:
        """A copy that shares nothing with this record; safe while another thread merges into it
        (``dict()`` of a mapping is one call under the GIL)."""
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                changes[f.name] = dict(value)
            elif isinstance(value, Summed):
                changes[f.name] = value.copy()
        return dataclasses.replace(self, **changes)

    def _flat(self) -> dict[str, int | float]:
        return {key: getattr(self, name) for name, key in self.FLAT.items()}

    @classmethod
    def _from_flat(cls, flat: dict[str, Any]) -> Self | None:
        """The group from the flat names it owns (None: none of them is there)."""
        if not any(key in flat for key in cls.FLAT.values()):
            return None
        kinds = {f.name: f.type for f in dataclasses.fields(cls)}  # "int" or "float" (postponed annotations)
        return cls(
            **{
                name: _number(flat, key) if kinds[name] == "float" else _count(flat, key)
                for name, key in cls.FLAT.items()
                if key in flat
            }
        )


def _number(flat: dict[str, Any], key: str) -> float:
    value = flat[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"counter {key!r}: expected a number, got {value!r:.80}")
    return float(value)


def _count(flat: dict[str, Any], key: str) -> int:
    value = flat[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"counter {key!r}: expected an integer, got {value!r:.80}")
    return value


@dataclass
class RequestCounts(Summed):
    """An object-store reader's requests (loaders/storage/objectstore.py): every attempt counts as a
    request, failed and retried ones included."""

    requests: int = 0
    retries: int = 0
    failures: int = 0  # requests that failed for good
    bytes_transferred: int = 0  # bytes in successful responses
    refused_connections: int = 0  # attempts refused or reset by a store that had answered (an outage)
    outage_s: float = 0.0  # seconds with a request waiting out an outage, summed over readers
    # CPU seconds of the client: the calling threads' during its requests, and its own I/O threads'
    client_cpu_s: float = 0.0
    client_retries: int = 0  # retries the client made by itself that it let be known (clients/base.py)
    faults: dict[FaultKind, int] = field(default_factory=dict)  # retryable failures by kind
    by_endpoint: dict[int, int] = field(default_factory=dict)  # requests per endpoint (several only)

    FLAT: ClassVar[dict[str, str]] = {
        "requests": "requests",
        "retries": "retries",
        "failures": "request_failures",
        "bytes_transferred": "bytes_transferred",
        "refused_connections": "refused_connections",
        "outage_s": "outage_s",
        "client_cpu_s": "client_cpu_s",
        "client_retries": "client_retries",
    }

    def fault(self, kind: FaultKind) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def _flat(self) -> dict[str, int | float]:
        return {
            **super()._flat(),
            **{f"fault_{kind}": n for kind, n in self.faults.items()},
            **{f"endpoint_{i}_requests": n for i, n in self.by_endpoint.items()},
        }

    @classmethod
    def _from_flat(cls, flat: dict[str, Any]) -> Self | None:
        faults = {kind: _count(flat, f"fault_{kind}") for kind in FAULT_KINDS if f"fault_{kind}" in flat}
        by_endpoint = {
            int(key.split("_")[1]): _count(flat, key)
            for key in flat
            if key.startswith("endpoint_") and key.endswith("_requests") and key.split("_")[1].isdigit()
        }
        counts = super()._from_flat(flat) or (cls() if faults or by_endpoint else None)
        if counts is not None:
            counts.faults, counts.by_endpoint = faults, by_endpoint
        return counts


@dataclass
class CacheStats(Summed):
    """A shard cache's counts (loaders/storage/shardcache.py); reset per epoch."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    bytes_fetched: int = 0  # bytes of downloads that were verified and committed
    bytes_evicted: int = 0
    wait_s: float = 0.0  # blocked on a key lock while another process/thread downloaded that shard
    bypassed: int = 0  # misses a static cache read through without keeping (counted in misses too)
    # entries whose bytes differed from their checksums at fill when this process first opened
    # them: evicted and fetched again; the bytes of their damaged parts; bytes checked at open
    damaged: int = 0
    damaged_bytes: int = 0
    verified_bytes: int = 0

    FLAT: ClassVar[dict[str, str]] = {
        name: f"cache_{name}"
        for name in (
            "hits",
            "misses",
            "evictions",
            "bytes_fetched",
            "bytes_evicted",
            "wait_s",
            "bypassed",
            "damaged",
            "damaged_bytes",
            "verified_bytes",
        )
    }

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class CacheHealthCounts(Summed):
    """A cache read around rather than used (loaders/storage/cachehealth.py), and downloads the
    store's own checksum refused."""

    unusable: int = 0  # times the cache failed and was left alone for a while
    bypassed_bytes: int = 0  # bytes read through the store around a failed cache
    recreated: int = 0  # the cache directory was removed under the job and made again
    store_checksum_mismatches: int = 0  # downloads that did not match the store's checksum: not cached

    FLAT: ClassVar[dict[str, str]] = {
        "unusable": "cache_unusable",
        "bypassed_bytes": "cache_bypassed_bytes",
        "recreated": "cache_recreated",
        "store_checksum_mismatches": "store_checksum_mismatches",
    }


@dataclass
class ThrottleCounts(Summed):
    """What the throttled link did (loaders/storage/throttle.py): waits in whole milliseconds."""

    requests: int = 0
    bytes: int = 0
    wait_ms: int = 0  # slept for bandwidth, summed over threads
    latency_ms: int = 0  # slept for per-request latency, summed over threads

    FLAT: ClassVar[dict[str, str]] = {
        name: f"throttle_{name}" for name in ("requests", "bytes", "wait_ms", "latency_ms")
    }


@dataclass
class LossCounts(Summed):
    """Regions of shards a reader skipped as damaged (loaders/observe/losses.py)."""

    regions: int = 0
    bytes: int = 0
    samples: int = 0  # where known

    FLAT: ClassVar[dict[str, str]] = {name: f"lost_{name}" for name in ("regions", "bytes", "samples")}


@dataclass
class LoaderCounters(Summed):
    """The counters a StageStats carries; summed as StageStats are."""

    requests: RequestCounts | None = None
    cache: CacheStats | None = None
    cache_health: CacheHealthCounts | None = None
    throttle: ThrottleCounts | None = None
    lost: LossCounts | None = None
    ring_fallback_batches: int = 0  # batches that found no free shared-memory ring slot
    # the samples an epoch's plan delivers, riding with its first batch (None: not known)
    epoch_samples_expected: int | None = None
    epoch_samples_lost: int = 0  # samples epochs read to their end delivered short of their plan

    FLAT: ClassVar[dict[str, str]] = {
        "ring_fallback_batches": "ring_fallback_batches",
        "epoch_samples_lost": "epoch_samples_lost",
    }

    def groups(self) -> tuple[Summed | None, ...]:
        return (self.requests, self.cache, self.cache_health, self.throttle, self.lost)

    def __bool__(self) -> bool:
        """Whether anything was counted (a batch that carries only counters is still sent)."""
        return any(group is not None for group in self.groups()) or any(
            (self.ring_fallback_batches, self.epoch_samples_lost, self.epoch_samples_expected is not None)
        )

    def as_flat(self) -> dict[str, int | float]:
        """The flat names and values summaries carry; a group that is None writes none."""
        out: dict[str, int | float] = {}
        for group in self.groups():
            if group is not None:
                out.update(group._flat())
        out.update({key: n for key, n in self._flat().items() if n})
        if self.epoch_samples_expected is not None:
            out["epoch_samples_expected"] = self.epoch_samples_expected
        return out

    @classmethod
    def from_flat(cls, flat: dict[str, Any]) -> LoaderCounters:
        """The counters from their flat names (a name it does not know is ignored: a summary written
        by a newer version still reads). Raises ValueError naming a counter that is not a number."""
        return cls(
            requests=RequestCounts._from_flat(flat),
            cache=CacheStats._from_flat(flat),
            cache_health=CacheHealthCounts._from_flat(flat),
            throttle=ThrottleCounts._from_flat(flat),
            lost=LossCounts._from_flat(flat),
            **{name: _count(flat, key) for name, key in cls.FLAT.items() if key in flat},
            epoch_samples_expected=_count(flat, "epoch_samples_expected")
            if "epoch_samples_expected" in flat
            else None,
        )
