"""A sweep's books on its tiers' client-side shard caches, kept from the tiers' sweep-file entries.

The RAM caches a sweep's cells use are its own from its first cell to its end (claimed, then
released or kept on request); a cell killed mid-download leaves partial files in its tier's cache;
a sweep that died leaves its RAM caches behind. The directories themselves: ramcache.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from iobench.tiers import make_tier, ramcache


def tier_option(spec: Mapping[str, Any], key: str) -> object:
    """A tier option of a sweep-file entry, looked for in a throttled tier's inner tier too."""
    if key in spec:
        return spec[key]
    inner = spec.get("inner")
    return inner.get(key) if isinstance(inner, dict) else None


def client_cache(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """(directory, medium) of a tier's shard cache, when its sweep-file entry asks for one."""
    if not (tier_option(spec, "cache_dir") or tier_option(spec, "memory_cache")):
        return None
    try:
        return make_tier(spec).client_cache()
    except Exception:  # the cell reports a tier it cannot build; the sweep only cleans up after it
        return None


def remove_partials(spec: Mapping[str, Any]) -> str | None:
    """Partial downloads a killed cell left in its tier's shard cache, removed; a line for the
    cell's log saying so (None when there were none)."""
    found = client_cache(spec)
    if found is None:
        return None
    try:
        n = ramcache.remove_partial_downloads(found[0])
    except OSError as exc:
        return f"could not check the shard cache {found[0]} for partial downloads: {exc}"
    return f"removed {n} partial download(s) the cell's killed processes left in {found[0]}" if n else None


class RamCacheBooks:
    """The RAM caches one sweep holds: claimed before its first cell, so that a later sweep knows
    whose they are, and released when it ends, so that RAM is not left behind.

    Each method returns what it did that the user should hear about (the CLI prints it)."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = run_dir
        self._held: dict[str, bool] = {}  # RAM cache directory -> keep it after the sweep

    def claim(self, tier_specs: Iterable[Mapping[str, Any]]) -> list[str]:
        """Mark the RAM caches of these tiers' sweep-file entries as this sweep's (see ramcache.py)."""
        notes = []
        for spec in tier_specs:
            found = client_cache(spec)
            if found is None or found[1] != ramcache.RAM_MEDIUM or found[0] in self._held:
                continue
            keep = bool(tier_option(spec, "keep_memory_cache"))
            try:
                ramcache.claim(found[0], self.run_dir, keep=keep)
            except OSError as exc:
                notes.append(f"could not mark the RAM cache {found[0]} as this sweep's: {exc}")
                continue
            self._held[found[0]] = keep
        return notes

    def release(self) -> list[str]:
        """Each RAM cache removed, unless kept on request (tier option keep_memory_cache)."""
        notes = []
        for path, keep in self._held.items():
            if keep:
                size = ramcache.dir_bytes(path) if os.path.isdir(path) else 0
                notes.append(
                    f"kept the RAM cache {path} ({size / 1e6:,.1f} MB, tier option keep_memory_cache); "
                    f"it holds that RAM until removed: rm -r {path}"
                )
            else:
                freed = ramcache.release(path)
                notes.append(f"removed the RAM cache {path} ({freed / 1e6:,.1f} MB)")
        self._held.clear()
        return notes


def settle_ram_leftovers() -> list[str]:
    """RAM caches of sweeps that ended without removing them: removed (kept ones reported)."""
    notes = []
    for left in ramcache.leftovers():
        if left.owner_alive:
            continue  # a sweep running now
        if left.kept:
            notes.append(f"a RAM cache kept on request holds RAM: {left.describe()}; rm -r {left.path}")
        elif left.owner_pid is None:
            notes.append(
                f"found a RAM cache of unknown origin: {left.describe()}; rm -r {left.path} frees it"
            )
        else:
            ramcache.release(left.path)
            notes.append(f"removed a RAM cache left by a sweep that did not finish: {left.describe()}")
    return notes
