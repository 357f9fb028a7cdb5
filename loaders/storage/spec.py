"""What a storage tier tells a loader about reading its shards: one typed, picklable record that
travels from the tier to every reader process, with each layer's setting in a field of its own
(the store's part size and concurrency, the shard cache, the throttle, the read deadline).

Every storage default is written here and nowhere else. Importing this module imports neither
fsspec nor torch: tiers and the sweep's checks build these records without a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from loaders.storage.clients import DEFAULT_CLIENT, ClientChoice
from loaders.storage.throttle import ThrottleSpec

DEFAULT_PART_BYTES = 8 * 2**20  # one ranged GET of an object store
DEFAULT_CONCURRENCY = 4  # ranged GETs (or whole-object reads) in flight per reader
CACHE_POLICIES = ("lru", "static")  # what a cache smaller than the data keeps (shardcache.py)
CACHE_POLICY_CHOICES = ("auto", *CACHE_POLICIES)  # auto: chosen by the sizes (choose_policy)


@dataclass(frozen=True)
class CacheSpec:
    """A bounded local shard cache in front of an object store (loaders/storage/shardcache.py).

    ``bytes`` None: half the free space of ``dir``'s file system. ``policy``: what a cache smaller
    than the data keeps; "auto" is static when the shards' sizes add up to more than the cache.
    ``verify``: each reading process checks an entry against the checksums recorded at its fill
    when it first opens it (loaders/storage/entrysum.py); off only to measure what that costs."""

    dir: str
    bytes: int | None = None
    policy: str = "auto"
    verify: bool = True

    def __post_init__(self) -> None:
        if self.policy not in CACHE_POLICY_CHOICES:
            raise ValueError(
                f"cache_policy={self.policy!r}: allowed values are {', '.join(CACHE_POLICY_CHOICES)}"
            )


@dataclass(frozen=True)
class SourceSpec:
    """How to read a dataset's shards (or objects), as its tier describes it."""

    # fsspec's own options (endpoint, region, timeouts); may hold credentials: never printed
    storage_options: Mapping = field(default_factory=dict, repr=False)
    # the client an S3 store is read with, by name (loaders/storage/clients/: s3fs, minio,
    # s3torchconnector, obstore, s3dlio, or one another package registered; "auto": the best
    # measured one installed); other stores are read through fsspec
    client: ClientChoice = DEFAULT_CLIENT
    # how long a request (object store, retries included) or a read (network file system) may go
    # without an answer before it fails; None waits as long as the client does
    deadline_s: float | None = None
    # several S3 gateways of one store with no load balancer in front: each shard is read from one
    # of them, chosen by its URL, and a retry goes to the next (loaders/storage/objectstore.py)
    endpoints: tuple[str, ...] = ()
    # endpoints that answered the process that built this spec (its tier's first read): a reader
    # process rides through their restarts from its own first request (loaders/storage/outage.py);
    # an endpoint not here is ridden through only once it has answered that process
    answered_endpoints: tuple[str, ...] = ()
    cache: CacheSpec | None = None
    throttle: ThrottleSpec | None = None  # emulate a slower link: bandwidth cap + latency per request
    part_bytes: int = DEFAULT_PART_BYTES
    concurrency: int = DEFAULT_CONCURRENCY
    shard_sizes: Mapping[str, int] = field(default_factory=dict)  # url -> bytes, saves a HEAD each
    # samples per shard URL (the dataset manifest's counts): the even split over ranks and an exact
    # len() need them; local shards missing here are counted from their tar headers
    shard_samples: Mapping[str, int] = field(default_factory=dict)
    etags: Mapping[str, str] = field(default_factory=dict)
    # url -> the sha256 recorded when the shard was uploaded (a dataset manifest's): the shard
    # cache checks each download against it, so a store's damaged copy is never cached as good
    shard_sha256: Mapping[str, str] = field(default_factory=dict)
