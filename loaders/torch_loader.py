"""The PyTorch DataLoader path: drop-in for training code in three lines.

    from loaders import ShardLoader
    loader = ShardLoader("/data/train-{000000..000127}.tar", batch_size=256, workers=8)
    for images, labels in loader: ...

Workers decode and collate whole batches (DataLoader ``batch_size=None``) so that the collate
stage is measured where it runs and only finished uint8 batches cross the process boundary.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import replace

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .instrument import StageStats
from .pipeline import Batch, PipelineSpec, stream
from .shards import check_splittable, expand_urls, shards_for
from .sources import ShardSource, SourceSpec, default_cache_bytes


def _quiet_worker(_: int) -> None:
    # one intra-op thread per worker: the workers are the parallelism, and torch's default pool
    # makes small tensor ops 30x slower on a busy box
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


class ShardStream(IterableDataset):
    """An IterableDataset of collated batches from WebDataset shards, split by rank and worker."""

    def __init__(
        self,
        urls: Sequence[str],
        spec: PipelineSpec,
        *,
        source: SourceSpec | None = None,
        rank: int = 0,
        world_size: int = 1,
        shuffle_shards: bool = True,
        objects: bool = False,
    ) -> None:
        super().__init__()
        self.objects = objects
        self.urls, self.spec, self.source = list(urls), spec, source or SourceSpec()
        self.rank, self.world_size, self.shuffle_shards = rank, world_size, shuffle_shards
        self.epoch = 0

    def __iter__(self) -> Iterator[Batch]:
        info = get_worker_info()
        worker, num_workers = (info.id, info.num_workers) if info else (0, 1)
        if info is None:
            torch.set_num_threads(1)
        mine = shards_for(
            self.urls,
            rank=self.rank,
            world_size=self.world_size,
            worker=worker,
            num_workers=num_workers,
            seed=self.spec.seed,
            epoch=self.epoch,
            shuffle=self.shuffle_shards,
        )
        rng = random.Random(hash((self.spec.seed, self.epoch, self.rank, worker)))
        return stream(mine, ShardSource(self.source), self.spec, rng, objects=self.objects)


class ShardLoader:
    """Batches of (uint8 images N x 3 x H x W, int64 labels) from shards, with per-stage stats.

    ``objects=[(key, url, label), ...]`` reads one object per sample instead of shards, with
    ``concurrency`` reads in flight per reader.

    ``stats`` accumulates fetch/decode/augment/collate times, bytes read, errors, request and
    cache counters over everything delivered so far. s3:// shards stream with ``concurrency``
    ranged GETs of ``part_bytes`` in flight; with ``cache_dir`` they go through a bounded local
    shard cache (``cache_bytes``, default half the free space) shared by every process on the host. ``return_batches=True`` yields :class:`Batch` objects (keys and stats per
    batch) instead of ``(images, labels)``.
    """

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        objects: Sequence[tuple[str, str, int]] | None = None,
        batch_size: int = 64,
        workers: int = 2,
        prefetch: int = 2,
        shuffle_buffer: int = 1000,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        on_error: str = "skip",
        drop_last: bool = False,
        storage_options: dict | None = None,
        cache_dir: str | None = None,
        cache_bytes: int | None = None,
        shard_sizes: dict[str, int] | None = None,
        part_bytes: int = 8 * 2**20,
        concurrency: int = 4,
        pin_memory: bool | None = None,
        return_batches: bool = False,
        **pipeline_options: object,
    ) -> None:
        if (urls is None) == (objects is None):
            raise ValueError("give shard urls, or objects=[(key, url, label), ...] for one object per sample")
        self.urls = expand_urls(urls) if urls is not None else list(objects or [])
        if not self.urls:
            raise ValueError("no shard URLs or sample objects given")
        check_splittable(len(self.urls), world_size, workers)
        spec = PipelineSpec(
            batch_size=batch_size,
            shuffle_buffer=shuffle_buffer,
            seed=seed,
            on_error=on_error,
            drop_last=drop_last,
        )
        if pipeline_options:
            spec = replace(spec, **pipeline_options)
        self.spec = spec
        self.workers = workers
        self.return_batches = return_batches
        source = SourceSpec(
            storage_options=dict(storage_options or {}),
            cache_dir=cache_dir,
            cache_bytes=cache_bytes,
            sizes=dict(shard_sizes or {}),
            part_bytes=part_bytes,
            concurrency=concurrency,
        )
        if cache_dir and not cache_bytes:
            source.cache_bytes = default_cache_bytes(cache_dir)
        self.dataset = ShardStream(
            self.urls, spec, source=source, rank=rank, world_size=world_size, objects=objects is not None
        )
        self.stats = StageStats()
        self.epoch = 0
        self._loader = DataLoader(
            self.dataset,
            batch_size=None,
            num_workers=workers,
            prefetch_factor=prefetch if workers > 0 else None,
            pin_memory=torch.cuda.is_available() if pin_memory is None else pin_memory,
            worker_init_fn=_quiet_worker if workers > 0 else None,
            persistent_workers=False,
        )

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator:
        # each pass is a new epoch with a new shard order; workers receive the epoch when forked
        self.dataset.epoch = self.epoch
        self.epoch += 1
        for batch in self._loader:
            self.stats.merge(batch.stats)
            if batch.images is None:
                continue
            yield batch if self.return_batches else (batch.images, batch.labels)
