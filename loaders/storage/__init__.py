"""Reading storage: local shard files, object stores (ranged GETs, retries, deadlines), the
bounded local shard cache in front of them, and a throttled link. Importing this face imports
neither fsspec nor torch until a name is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "CACHE_POLICIES": "shardcache",
    "CacheDir": "shardcache_index",
    "CacheError": "shardcache",
    "DEADLINE_KEY": "objectstore",
    "DeadlineExceeded": "objectstore",
    "ENDPOINTS_KEY": "objectstore",
    "OBJECT_PROTOCOLS": "sources",
    "ObjectReader": "objectstore",
    "ObjectStoreError": "objectstore",
    "ShardCache": "shardcache",
    "ShardSource": "sources",
    "SourceSpec": "sources",
    "Throttle": "throttle",
    "ThrottleSpec": "throttle",
    "choose_policy": "shardcache",
    "default_burst": "throttle",
    "default_cache_bytes": "sources",
    "exception_chain": "objectstore",
    "open_local": "localfile",
}
__all__ = [
    "CACHE_POLICIES",
    "DEADLINE_KEY",
    "ENDPOINTS_KEY",
    "OBJECT_PROTOCOLS",
    "CacheDir",
    "CacheError",
    "DeadlineExceeded",
    "ObjectReader",
    "ObjectStoreError",
    "ShardCache",
    "ShardSource",
    "SourceSpec",
    "Throttle",
    "ThrottleSpec",
    "choose_policy",
    "default_burst",
    "default_cache_bytes",
    "exception_chain",
    "open_local",
]

if TYPE_CHECKING:
    from loaders.storage.localfile import open_local
    from loaders.storage.objectstore import (
        DEADLINE_KEY,
        ENDPOINTS_KEY,
        DeadlineExceeded,
        ObjectReader,
        ObjectStoreError,
        exception_chain,
    )
    from loaders.storage.shardcache import CACHE_POLICIES, CacheError, ShardCache, choose_policy
    from loaders.storage.shardcache_index import CacheDir
    from loaders.storage.sources import OBJECT_PROTOCOLS, ShardSource, SourceSpec, default_cache_bytes
    from loaders.storage.throttle import Throttle, ThrottleSpec, default_burst

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
