"""Reading storage: local shard files, object stores (ranged GETs, retries, deadlines, through
the object client chosen by name: clients/), the bounded local shard cache in front of them, and a
throttled link, stacked as layers over one typed description of the source (SourceSpec).
Importing this face imports neither fsspec nor torch until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "CACHE_POLICIES": "spec",
    "CLIENTS": "clients",
    "CLIENT_NAMES": "clients",
    "DEFAULT_CLIENT": "clients",
    "ClientChoice": "clients",
    "ClientEntry": "clients",
    "ClientName": "clients",
    "PluginClientName": "clients",
    "ResolvedClient": "clients",
    "CacheDir": "shardcache_index",
    "CacheError": "shardcache",
    "CacheSpec": "spec",
    "DEFAULT_CONCURRENCY": "spec",
    "DEFAULT_PART_BYTES": "spec",
    "DeadlineExceeded": "faults",
    "OBJECT_PROTOCOLS": "layers",
    "ObjectReader": "objectstore",
    "ObjectStoreError": "faults",
    "ShardCache": "shardcache",
    "ShardSource": "sources",
    "StoreChecksumError": "shardcache",
    "SourceSpec": "spec",
    "Throttle": "throttle",
    "ThrottleSpec": "throttle",
    "cache_reason": "cachehealth",
    "choose_policy": "shardcache",
    "default_burst": "throttle",
    "default_cache_bytes": "shardcache",
    "describe_client": "clients",
    "exception_chain": "faults",
    "fsync_dir": "shardcache_index",
    "installed_clients": "clients",
    "resolve_client": "clients",
    "reads_before_fork": "clients",
    "survives_fork": "clients",
    "open_local": "localfile",
}
__all__ = [
    "CACHE_POLICIES",
    "CLIENTS",
    "CLIENT_NAMES",
    "DEFAULT_CLIENT",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_PART_BYTES",
    "OBJECT_PROTOCOLS",
    "CacheDir",
    "CacheError",
    "CacheSpec",
    "ClientChoice",
    "ClientEntry",
    "ClientName",
    "DeadlineExceeded",
    "ObjectReader",
    "ObjectStoreError",
    "PluginClientName",
    "ResolvedClient",
    "ShardCache",
    "ShardSource",
    "SourceSpec",
    "StoreChecksumError",
    "Throttle",
    "ThrottleSpec",
    "cache_reason",
    "choose_policy",
    "default_burst",
    "default_cache_bytes",
    "describe_client",
    "exception_chain",
    "fsync_dir",
    "installed_clients",
    "open_local",
    "reads_before_fork",
    "resolve_client",
    "survives_fork",
]

if TYPE_CHECKING:
    from loaders.storage.cachehealth import cache_reason
    from loaders.storage.clients import (
        CLIENT_NAMES,
        CLIENTS,
        DEFAULT_CLIENT,
        ClientChoice,
        ClientEntry,
        ClientName,
        PluginClientName,
        ResolvedClient,
        describe_client,
        installed_clients,
        reads_before_fork,
        resolve_client,
        survives_fork,
    )
    from loaders.storage.faults import DeadlineExceeded, ObjectStoreError, exception_chain
    from loaders.storage.layers import OBJECT_PROTOCOLS
    from loaders.storage.localfile import open_local
    from loaders.storage.objectstore import ObjectReader
    from loaders.storage.shardcache import (
        CacheError,
        ShardCache,
        StoreChecksumError,
        choose_policy,
        default_cache_bytes,
    )
    from loaders.storage.shardcache_index import CacheDir, fsync_dir
    from loaders.storage.sources import ShardSource
    from loaders.storage.spec import (
        CACHE_POLICIES,
        DEFAULT_CONCURRENCY,
        DEFAULT_PART_BYTES,
        CacheSpec,
        SourceSpec,
    )
    from loaders.storage.throttle import Throttle, ThrottleSpec, default_burst

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
