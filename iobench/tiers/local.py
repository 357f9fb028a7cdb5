"""A dataset on a local filesystem (NVMe, RAID, SATA, a VM disk ...)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from iobench.host import blockdev, pagecache
from iobench.host.memory import usable_memory
from iobench.host.units import format_bytes, format_percent
from iobench.results.choices import CacheMode
from iobench.tiers.base import (
    COLD_MAX_FRACTION,
    CacheState,
    Option,
    Tier,
    TierConfigError,
    resident_state,
)

__all__ = ["LocalTier"]


class LocalTier(Tier):
    """Shards read straight from a local directory; cold = evicted from the page cache."""

    kind: ClassVar[str] = "local"
    reads_block_devices = True
    options: ClassVar[dict[str, Option]] = {
        "path": Option((str, os.PathLike), required=True, help="dataset directory"),
        "name": Option(str, help="label for reports"),
        "drop_caches": Option(
            bool,
            default=False,
            help="as root, fall back to /proc/sys/vm/drop_caches (whole host) when "
            "per-file eviction leaves the dataset partly cached",
        ),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        path = os.path.abspath(os.fspath(self.config["path"]))
        try:
            os.stat(path)
        except PermissionError:
            raise TierConfigError(
                f"local tier: path {path!r} is not reachable by this user (uid {os.getuid()}): a "
                "parent directory is not readable or searchable; grant access or run as its owner"
            ) from None
        except FileNotFoundError:
            raise TierConfigError(
                f"local tier: path {path!r} does not exist; create the dataset there "
                "(iobench dataset synth / pack) or point 'path' at an existing dataset directory"
            ) from None
        if not os.path.isdir(path):
            raise TierConfigError(
                f"local tier: path {path!r} is not a directory; 'path' must be the dataset "
                "directory that holds the shards, not a shard file"
            )
        if not os.access(path, os.R_OK | os.X_OK):
            raise TierConfigError(
                f"local tier: directory {path!r} is not readable by this user (uid "
                f"{os.getuid()}); grant read and execute permission or run as its owner"
            )
        self.path = path
        self.name = self.config["name"] or os.path.basename(path.rstrip("/")) or path

    def dataset_dir_or_url(self) -> str:
        return self.path

    def shard_paths(self, manifest: Any) -> list[str]:
        return [os.path.abspath(os.fspath(p)) for p in manifest.shard_paths(self.path)]

    def shard_urls(self, manifest: Any) -> list[str]:
        # Plain absolute paths: fsspec treats them as "file", and so does every peer loader.
        return self.shard_paths(manifest)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "name": self.name, "path": self.path}
        try:
            st = os.statvfs(self.path)
            out["capacity_bytes"] = st.f_blocks * st.f_frsize
            out["free_bytes"] = st.f_bfree * st.f_frsize
            # What an unprivileged writer can still use (ext4 reserves blocks for root).
            out["available_bytes"] = st.f_bavail * st.f_frsize
        except OSError as exc:
            out["statvfs_error"] = str(exc)
        out["storage"] = blockdev.describe_path(self.path)
        return out

    def prepare(self, manifest: Any, cache: CacheMode) -> CacheState:
        self.check_cache_mode(cache)
        paths = self.shard_paths(manifest)
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(
                f"local tier {self.name!r}: {len(missing)} of {len(paths)} shard files are "
                f"missing, first {missing[0]!r}; regenerate or re-stage the dataset"
            )
        total = sum(os.path.getsize(p) for p in paths)
        try:
            if cache == "cold":
                res = pagecache.evict(paths)
                method = "posix_fadvise(DONTNEED)"
                if (
                    res.fraction > COLD_MAX_FRACTION
                    and self.config["drop_caches"]
                    and pagecache.drop_all_caches()
                ):
                    method += " + drop_caches"
                    res = pagecache.residency(paths)
            elif cache == "warm":
                res = pagecache.warm(paths)
                method = "read-through"
            else:
                res = pagecache.residency(paths)
                method = "none"
        except pagecache.PageCacheUnsupported as exc:
            return CacheState(
                requested=cache,
                method="none",
                resident_bytes_before=None,
                total_bytes=total,
                resident_fraction_before=None,
                achieved="unknown",
                note=str(exc),
            )
        return resident_state(
            cache,
            method,
            res.resident_bytes,
            res.total_bytes,
            lambda _, achieved: self._note(cache, achieved, res),
        )

    @staticmethod
    def _note(cache: str, achieved: str, res: pagecache.Residency) -> str:
        if res.total_bytes == 0:
            return "the dataset's shard files are empty; there is nothing to cache"
        memory = usable_memory()  # a container's limit holds the page cache its reads fill
        ram = memory.total
        size = format_bytes(res.total_bytes)
        held = f"{format_percent(res.fraction)} of the dataset ({size}) is in the page cache"
        if cache == "as-is":
            return f"{held}; cache state left as found"
        if achieved == cache:
            return f"{held} after {'eviction' if cache == 'cold' else 'reading it'}"
        if cache == "cold":
            if res.total_bytes < ram:
                return (
                    f"{format_percent(res.fraction)} of the dataset stayed in the page cache after "
                    "eviction (pages that are dirty, under writeback or mapped by another "
                    "process are not dropped); close other readers, or as root set "
                    "drop_caches: true"
                )
            return f"{held} after eviction"
        if res.total_bytes >= ram:
            return (
                f"{held} after reading it: the dataset is larger than RAM "
                f"({memory.describe()}), so it cannot be fully warm"
            )
        return f"{held} after reading it: memory pressure evicted part of it (RAM {memory.describe()})"
