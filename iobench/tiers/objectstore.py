"""What every object-store tier shares (S3/MinIO/RGW, RADOS): a URL prefix, ranged reads through
the loaders' ObjectReader, and an optional bounded shard cache on local NVMe or in RAM.

The RAM cache is the same process-safe ShardCache placed on tmpfs (/dev/shm): bounded, shared by
every loader worker on the host, with the same hit/miss/eviction counters as the disk cache.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from typing import Any, ClassVar

from iobench.host.memory import usable_memory
from iobench.host.units import format_bytes
from iobench.results.choices import CacheMode
from loaders.storage import (
    CACHE_POLICIES,
    DEFAULT_CLIENT,
    DEFAULT_CONCURRENCY,
    DEFAULT_PART_BYTES,
    CacheError,
    CacheSpec,
    ClientChoice,
    ObjectStoreError,
    SourceSpec,
    StoreChecksumError,
    cache_reason,
    choose_policy,
    reads_before_fork,
)

from .base import (
    DEADLINE_OPTION,
    DEFAULT_DEADLINE_S,
    CacheState,
    Option,
    Tier,
    TierConfigError,
    check_deadline,
    resident_state,
)
from .ramcache import RAM_MEDIUM, dir_bytes, ram_cache_path

SIZE_HELP = "a size such as 20GB or 512MiB"

OBJECT_STORE_OPTIONS: dict[str, Option] = {
    "name": Option(str, help="label for reports"),
    "cache_dir": Option(str, help="local NVMe directory for the shard cache; omit to stream"),
    "cache_size": Option((str, int), help="limit of the shard cache, " + SIZE_HELP),
    "memory_cache": Option((str, int), help="a shard cache in RAM (tmpfs) of this size, " + SIZE_HELP),
    "part_size": Option((str, int), default=DEFAULT_PART_BYTES, help="ranged read size, " + SIZE_HELP),
    "concurrency": Option(int, default=DEFAULT_CONCURRENCY, help="ranged reads in flight per reader"),
    "upload": Option(bool, default=False, help="upload the sweep's dataset to url first (idempotent)"),
    "cache_policy": Option(
        str,
        default="auto",
        help="what a shard cache keeps: auto (static when it cannot hold the dataset, else lru), lru, or "
        "static (keep what is cached, read the rest through)",
    ),
    "keep_memory_cache": Option(
        bool,
        default=False,
        help="keep the memory_cache in RAM (tmpfs) after the sweep; by default the sweep removes it",
    ),
    "deadline_s": DEADLINE_OPTION,
}


class ObjectStoreTier(Tier):
    """Subclasses set ``scheme``, declare ``options`` (``url`` + OBJECT_STORE_OPTIONS + their own) and
    implement ``storage_options``, ``describe_remote``, ``server_caches`` and ``upload_dataset``."""

    scheme: ClassVar[str]

    @classmethod
    def check_options(cls, options: Any) -> dict[str, Any]:
        config = super().check_options(options)
        check_deadline(f"{cls.kind} tier", config)
        return config

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        from iobench.host.units import parse_size

        url = self.config["url"].rstrip("/")
        prefix = f"{self.scheme}://"
        if not url.startswith(prefix) or len(url) <= len(prefix):
            raise TierConfigError(f"{self.kind} tier: url={url!r} must look like {prefix}bucket/prefix")
        self.url = url
        self.container = url[len(prefix) :].split("/", 1)[0]
        self.name = self.config["name"] or f"{self.kind}-{self.container}"
        try:
            self.part_bytes = parse_size(self.config["part_size"])
            cache_size = parse_size(self.config["cache_size"]) if self.config["cache_size"] else None
            memory = parse_size(self.config["memory_cache"]) if self.config["memory_cache"] else None
        except ValueError as exc:
            raise TierConfigError(f"{self.kind} tier: {exc}; write {SIZE_HELP}") from None
        if memory and (self.config["cache_dir"] or cache_size):
            raise TierConfigError(f"{self.kind} tier: give memory_cache or cache_dir/cache_size, not both")
        if cache_size and not self.config["cache_dir"]:
            raise TierConfigError(
                f"{self.kind} tier: cache_size is set but cache_dir is not; give both or neither"
            )
        if self.config["cache_policy"] not in ("auto", *CACHE_POLICIES):
            raise TierConfigError(
                f"{self.kind} tier: cache_policy={self.config['cache_policy']!r}: allowed values are auto, "
                + ", ".join(CACHE_POLICIES)
            )
        self.dataset_bytes: int | None = None  # known once the manifest is read: it decides auto
        # endpoints that answered this tier's reads here (the manifest's): the loader's readers ride
        # through their restarts (SourceSpec.answered_endpoints)
        self.answered: set[str] = set()
        if self.config["keep_memory_cache"] and not memory:
            raise TierConfigError(f"{self.kind} tier: keep_memory_cache is set but memory_cache is not")
        if memory:
            self.cache_dir: str | None = ram_cache_path(self.name)
            self.cache_bytes: int | None = memory
            self.cache_medium = RAM_MEDIUM
        elif self.config["cache_dir"]:
            self.cache_dir = os.path.abspath(os.path.expanduser(self.config["cache_dir"]))
            self.cache_bytes = cache_size
            self.cache_medium = "local disk"
        else:
            self.cache_dir, self.cache_bytes, self.cache_medium = None, None, "none"

    # -- to implement ---------------------------------------------------------------------
    def describe_remote(self) -> dict[str, Any]:
        """Endpoint or cluster facts for describe()."""
        return {}

    def server_caches(self) -> str:
        """Which caches beyond the client's control may flatter repeated reads."""
        return "server-side caches cannot be controlled from the client and may flatter repeated reads"

    # -- shared ---------------------------------------------------------------------------
    def dataset_dir_or_url(self) -> str:
        return self.url

    def shard_urls(self, manifest: Any) -> list[str]:
        return [f"{self.url}/{s.name}" for s in manifest.shards]

    @property
    def deadline_s(self) -> float:
        return super().deadline_s or DEFAULT_DEADLINE_S

    def endpoints(self) -> tuple[str, ...]:
        """Several gateways of one store, when the tier lists them (SourceSpec.endpoints)."""
        return ()

    def client_name(self) -> ClientChoice:
        """The object client the tier is read with (loaders/storage/clients/); a store other than S3
        is read through fsspec whatever it says."""
        return DEFAULT_CLIENT

    def reader(self):
        """A reader for the tier's own reads in this process (the manifest, the objects index, a
        warm cache's fill): with the tier's client, unless its runtime would not survive the fork of
        the loader's workers that follows (obstore, s3dlio): then with s3fs, so that the workers'
        reads, the measured ones, are the client's."""
        from loaders.storage import ObjectReader

        return ObjectReader(
            self.storage_options(),
            client=reads_before_fork(self.client_name()),
            part_bytes=self.part_bytes,
            concurrency=self.config["concurrency"],
            protocol=self.scheme,
            deadline_s=self.deadline_s,
            endpoints=self.endpoints(),
        )

    def client_cache(self) -> tuple[str, str] | None:
        return (self.cache_dir, self.cache_medium) if self.cache_dir else None

    def read_json(self, name: str) -> Any:
        from loaders.storage import DeadlineExceeded, ObjectStoreError

        from .faults import likely_cause

        reader = self.reader()
        where = self.object_url(name)
        try:
            size = reader.info(where)["size"]
            data = reader.read_range(where, 0, size)
            self.answered.update(reader.answered_endpoints())
            return json.loads(data)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not valid JSON: {exc}") from None
        except OSError as exc:
            # the access hint (credentials, staging) only where the error points there: a timeout or
            # a refused connection is not a credentials problem (the cell's error hint names those)
            cause = likely_cause(exc)
            hint = f". {self.access_hint()}" if cause.kind in ("missing", "credentials", "other") else ""
            kind = DeadlineExceeded if isinstance(exc, DeadlineExceeded) else ObjectStoreError
            raise kind(
                getattr(exc, "errno", None) or errno.EIO,
                f"{self.kind} tier {self.name!r}: cannot read {where}: {exc}{hint}",
            ) from None
        finally:
            reader.close()

    def load_manifest(self) -> Any:
        from ..datasets.manifest import MANIFEST_NAME, Manifest, ManifestError

        try:
            raw = self.read_json(MANIFEST_NAME)
        except ValueError as exc:
            raise ManifestError(str(exc)) from None
        manifest = Manifest.from_dict(raw, where=self.object_url(MANIFEST_NAME))
        self.dataset_bytes = manifest.total_bytes
        return manifest

    def access_hint(self) -> str:
        return "Check that the dataset was uploaded (`iobench dataset upload`)."

    def cache_limit(self) -> int | None:
        if not self.cache_dir:
            return None
        from loaders.storage import default_cache_bytes

        return self.cache_bytes or default_cache_bytes(self.cache_dir)

    def cache_policy(self) -> str:
        """The policy the shard cache uses: auto resolved against the dataset (loaders/storage/shardcache.py)."""
        return choose_policy(self.config["cache_policy"], self.cache_limit() or 0, self.dataset_bytes)

    def source(self, manifest: Any) -> SourceSpec:
        urls = self.shard_urls(manifest)
        cache = None
        if self.cache_dir:
            cache = CacheSpec(self.cache_dir, self.cache_limit(), self.config["cache_policy"])
        return SourceSpec(
            storage_options=self.storage_options(),
            client=self.client_name(),
            deadline_s=self.deadline_s,
            endpoints=self.endpoints(),
            answered_endpoints=tuple(sorted(self.answered)),
            cache=cache,
            part_bytes=self.part_bytes,
            concurrency=self.config["concurrency"],
            shard_sizes={u: s.bytes for u, s in zip(urls, manifest.shards, strict=True)},
            # what the upload recorded: a download that differs is never cached as good
            shard_sha256={u: s.sha256 for u, s in zip(urls, manifest.shards, strict=True)},
        )

    def prepare(self, manifest: Any, cache: CacheMode) -> CacheState:
        self.check_cache_mode(cache)
        total = manifest.total_bytes
        if not self.cache_dir:
            return self._streamed(
                cache, total, "none (streamed, no client cache)", f"every byte comes from {self.url}"
            )
        from loaders.storage import ShardCache

        self.dataset_bytes = total
        if self.cache_medium == RAM_MEDIUM:
            self._check_ram_room(total)
        policy = self.cache_policy()
        urls = self.shard_urls(manifest)
        try:
            shard_cache = ShardCache(self.cache_dir, self.cache_limit() or 1, policy=policy)
            method, said = self._cold_or_warm(shard_cache, cache, urls, manifest, policy)
        except ObjectStoreError:
            raise  # the store's failure is the cell's
        except OSError as exc:  # the cache's own disk: the loader reads around it (cachehealth.py)
            return self._streamed(
                cache,
                total,
                "none: the shard cache cannot be used",
                f"the shard cache at {self.cache_dir} cannot be used ({cache_reason(exc)}: {exc}): every "
                f"shard is read through from {self.url}, and the loader tries the cache again for new "
                "entries as it goes",
            )
        cached = sum(s.bytes for u, s in zip(urls, manifest.shards, strict=True) if shard_cache.contains(u))

        def note(fraction: float, _achieved: str) -> str:
            return (
                f"{100 * fraction:.0f} % of the dataset is in the {self.cache_medium} shard cache "
                f"({self.cache_dir}, {policy}, limit {format_bytes(shard_cache.max_bytes)}, "
                f"{100 * shard_cache.max_bytes / max(1, total):.0f} % of the dataset)"
                + "".join(f"; {x}" for x in said)
                + f"; {self.server_caches()}"
            )

        return resident_state(cache, method, cached, total, note)

    def _streamed(self, cache: CacheMode, total: int, method: str, note: str) -> CacheState:
        """The cache state of a tier read without a shard cache: nothing of it held on the client."""
        return CacheState(
            requested=cache,
            method=method,
            resident_bytes_before=0,
            total_bytes=total,
            resident_fraction_before=0.0,
            achieved="cold" if cache == "cold" else "unknown",
            note=f"{note}; {self.server_caches()}",
        )

    def _cold_or_warm(
        self, shard_cache: Any, cache: CacheMode, urls: list[str], manifest: Any, policy: str
    ) -> tuple[str, list[str]]:
        """Empty the shard cache (cold) or fill it (warm): how, and what was found on the way (a
        store's copy that does not match its sha256 at upload is not cached; a disk that fills
        stops the filling, and the rest is read through)."""
        if cache == "cold":
            shard_cache.clear()
            return f"shard cache ({self.cache_medium}) cleared", []
        if cache != "warm":
            return "none", []
        said: list[str] = []
        reader = self.reader()
        try:
            for url, entry in zip(urls, manifest.shards, strict=True):
                if entry.bytes > shard_cache.max_bytes:
                    continue
                try:
                    shard_cache.get(
                        url,
                        lambda u, out, n=entry.bytes: reader.download(u, out, n),
                        size=entry.bytes,
                        sha256=entry.sha256,
                    )
                except StoreChecksumError as exc:
                    said.append(f"{exc}: not cached")
                except CacheError as exc:
                    said.append(f"filling stopped at {url}: {cache_reason(exc)}; the rest is read through")
                    break
        finally:
            reader.close()
        method = f"shard cache ({self.cache_medium}, {policy}) filled" + (
            "; a cache smaller than the dataset keeps its first shards"
            if policy == "static"
            else "; a cache smaller than the dataset keeps its last shards"
        )
        return method, said

    def _check_ram_room(self, dataset_bytes: int) -> None:
        """A RAM cache that its tmpfs cannot hold would measure a smaller cache than the one asked
        for (it evicts at ENOSPC), under the name of the one asked for: refused instead. Containers
        give /dev/shm 64 MiB unless told otherwise."""
        assert self.cache_dir is not None and self.cache_bytes is not None
        need = min(self.cache_bytes, dataset_bytes)
        mount = os.path.dirname(self.cache_dir)
        usage = shutil.disk_usage(mount)
        held = dir_bytes(self.cache_dir) if os.path.isdir(self.cache_dir) else 0
        if need > usage.free + held:
            raise TierConfigError(
                f"{self.kind} tier {self.name}: its RAM cache needs up to {format_bytes(need)} "
                f"(memory_cache {format_bytes(self.cache_bytes)}, dataset {format_bytes(dataset_bytes)}), "
                f"but {mount} has {format_bytes(usage.free + held)} free of {format_bytes(usage.total)}: "
                "give the host more (`docker run --shm-size=...`; Kubernetes: an emptyDir of medium Memory "
                "on /dev/shm) or set memory_cache smaller"
            )
        memory = usable_memory()  # tmpfs pages count against a container's memory limit too
        if memory.limit is not None and need > memory.available + held:
            raise TierConfigError(
                f"{self.kind} tier {self.name}: its RAM cache needs up to {format_bytes(need)}, but this "
                f"process has {memory.describe()}: the cache would fill it and the kernel's OOM killer "
                "end the cell. Give the job more memory (`docker run --memory`; Kubernetes: "
                "resources.limits.memory) or set memory_cache smaller"
            )

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "url": self.url,
            "part_bytes": self.part_bytes,
            "concurrency": self.config["concurrency"],
            "deadline_s": self.deadline_s,
            **self.describe_remote(),
        }
        if self.cache_dir:
            out["cache"] = {
                "medium": self.cache_medium,
                "dir": self.cache_dir,
                "limit_bytes": self.cache_limit(),
                "policy": self.cache_policy(),
                "free_bytes": shutil.disk_usage(self.cache_dir).free
                if os.path.isdir(self.cache_dir)
                else None,
            }
        return out
