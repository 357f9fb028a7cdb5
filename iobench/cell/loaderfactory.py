"""Loader backends by name: each turns (shard URLs, settings) into an epoch -> batches callable.

The sweep's ``loaders[i].kind`` is a name in the loaders' registry ("torch", "nodes", "dali", or one
a plugin registered), so the runner builds every backend the same way training code does, with
the same declared options. Every backend yields :class:`loaders.Batch` objects with the same stage
statistics, so the step loop and the metrics are backend-neutral.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from iobench.results.spec import LoaderSettings, RunSettings
from loaders import Batch, LoaderConfig, make_loader

EpochFactory = Callable[[int], Iterable[Batch]]


def loader_config(
    items: list,
    source_options: dict,
    loader: LoaderSettings,
    run: RunSettings,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> LoaderConfig:
    """The contract's config from a cell: the loader setting, the tier's source options (sizes and
    sample counts per shard included), the run settings, and which rank of how many reads (each
    rank gets a disjoint, equal share of the epoch: loaders.plan)."""
    objects = loader.layout == "objects"
    return LoaderConfig(
        urls=None if objects else items,
        objects=items if objects else None,
        batch_size=loader.batch_size,
        workers=loader.workers,
        prefetch=loader.prefetch,
        shuffle_buffer=loader.shuffle_buffer,
        seed=run.seed,
        rank=rank,
        world_size=world_size,
        on_error=run.on_error,
        storage_options=dict(source_options.get("storage_options") or {}),
        cache_dir=source_options.get("cache_dir"),
        cache_bytes=source_options.get("cache_bytes"),
        cache_policy=source_options.get("cache_policy", "auto"),
        shard_sizes=dict(source_options.get("shard_sizes") or {}),
        shard_samples=dict(source_options.get("shard_samples") or {}),
        part_bytes=source_options.get("part_bytes", 8 * 2**20),
        concurrency=source_options.get("concurrency", 4),
        throttle=source_options.get("throttle"),
        options=dict(loader.options),
        decode=loader.decode,
    )


def build_loader(
    items: list,
    source_options: dict,
    loader: LoaderSettings,
    run: RunSettings,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> EpochFactory:
    """``items``: shard URLs, or (key, url, label) per sample when ``loader.layout`` is objects.
    ``source_options`` come from the tier: storage options, cache directory and limit, sizes."""
    built = make_loader(
        loader.kind, loader_config(items, source_options, loader, run, rank=rank, world_size=world_size)
    )

    def epoch(e: int) -> Iterable[Batch]:
        built.set_epoch(e)
        return built

    return epoch
