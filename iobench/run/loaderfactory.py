"""Loader backends by name: each turns (shard URLs, settings) into an epoch -> batches callable.

Every backend yields :class:`loaders.Batch` objects with the same stage statistics, so the step
loop and the metrics are backend-neutral.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from loaders import Batch

EpochFactory = Callable[[int], Iterable[Batch]]


def _torch(items: list, source_options: dict, loader: dict, run: dict) -> EpochFactory:
    from loaders import ShardLoader

    objects = loader.get("layout", "shards") == "objects"
    shard_loader = ShardLoader(
        None if objects else items,
        objects=items if objects else None,
        batch_size=loader["batch_size"],
        workers=loader["workers"],
        prefetch=loader.get("prefetch", 2),
        shuffle_buffer=loader.get("shuffle_buffer", 1000),
        seed=run.get("seed", 0),
        on_error=run.get("on_error", "skip"),
        storage_options=source_options.get("storage_options"),
        cache_dir=source_options.get("cache_dir"),
        cache_bytes=source_options.get("cache_bytes"),
        shard_sizes=source_options.get("shard_sizes"),
        part_bytes=source_options.get("part_bytes", 8 * 2**20),
        concurrency=source_options.get("concurrency", 4),
        return_batches=True,
    )

    def epoch(e: int) -> Iterable[Batch]:
        shard_loader.set_epoch(e)
        return shard_loader

    return epoch


LOADER_BACKENDS: dict[str, Callable[[list[str], dict, dict, dict], EpochFactory]] = {"torch": _torch}


def build_loader(items: list, source_options: dict, loader: dict, run: dict) -> EpochFactory:
    """``items``: shard URLs, or (key, url, label) per sample when ``loader["layout"]`` is objects.
    ``source_options`` come from the tier: storage options, cache directory and limit, sizes."""
    kind = loader["kind"]
    if kind not in LOADER_BACKENDS:
        raise ValueError(f"loader.kind={kind!r}: allowed values are {', '.join(LOADER_BACKENDS)}")
    return LOADER_BACKENDS[kind](items, source_options, loader, run)
