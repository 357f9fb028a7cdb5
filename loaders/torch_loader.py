"""The PyTorch DataLoader path: drop-in for training code in three lines.

    from loaders import ShardLoader
    loader = ShardLoader("/data/train-{000000..000127}.tar", batch_size=256, workers=8)
    for images, labels in loader: ...

Workers decode and collate whole batches (DataLoader ``batch_size=None``) so that the collate
stage is measured where it runs and only finished uint8 batches cross the process boundary.
"""

from __future__ import annotations

import multiprocessing
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import fields

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .assemble import Batch
from .config import LoaderConfig
from .contract import EpochCursor, ResumableLoader, deliver
from .instrument import StageStats
from .pipeline import PipelineSpec, stream
from .registry import backend
from .shards import check_splittable, shards_for
from .shmring import ShmRing
from .sources import ShardSource, SourceSpec

_CONFIG_FIELDS = frozenset(f.name for f in fields(LoaderConfig))


def _quiet_worker(_: int) -> None:
    # one intra-op thread per worker: the workers are the parallelism, and torch's default pool
    # makes small tensor ops 30x slower on a busy box
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


class ShardStream(IterableDataset):
    """An IterableDataset of collated batches from WebDataset shards, split by rank and worker.

    Each batch is tagged with the worker that made it; ``skip[w]`` samples of worker w's shuffled
    stream are read but not decoded (resume). A worker's stream depends only on (seed, epoch, rank,
    worker, number of workers), never on timing, so skipping by count resumes exactly.
    """

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
        self.skip: list[int] = []
        self.ring: ShmRing | None = None  # this epoch's batch buffers, inherited by the forked workers

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
        skip = self.skip[worker] if worker < len(self.skip) else 0
        source = ShardSource(self.source)
        shared = info is not None
        batches = stream(
            mine,
            source,
            self.spec,
            rng,
            objects=self.objects,
            skip=skip,
            shared=shared,
            ring=self.ring if shared else None,
            reader=worker,
        )
        return _tagged(batches, worker)


def _tagged(batches: Iterator[Batch], worker: int) -> Iterator[Batch]:
    for batch in batches:
        batch.reader = worker
        yield batch


class ShardLoader(ResumableLoader):
    """Batches of (uint8 images N x 3 x H x W, int64 labels) from shards, with per-stage stats.

    The "torch" backend of :func:`loaders.make_loader`; its keyword arguments are the fields of
    :class:`loaders.LoaderConfig` (``ShardLoader.from_config(cfg)`` takes one whole).

    ``objects=[(key, url, label), ...]`` reads one object per sample instead of shards, with
    ``concurrency`` reads in flight per reader.

    ``stats`` accumulates fetch/decode/augment/collate times, bytes read, errors, request and
    cache counters over everything delivered so far. s3:// shards stream with ``concurrency``
    ranged GETs of ``part_bytes`` in flight; with ``cache_dir`` they go through a bounded local
    shard cache (``cache_bytes``, default half the free space) shared by every process on the host.
    ``return_batches=True`` yields :class:`Batch` objects (keys and stats per batch) instead of
    ``(images, labels)``.

    ``state_dict()`` after k batches, given to ``load_state_dict`` of a new loader with the same
    settings, continues the epoch: every worker skips (reads, does not decode) the samples of its
    own stream that the consumer already received, counted from the worker tag on each batch.
    """

    backend = "torch"

    def __init__(
        self,
        urls: str | Sequence[str] | None = None,
        *,
        pin_memory: bool | None = None,
        return_batches: bool = False,
        **config: object,
    ) -> None:
        unknown = sorted(set(config) - _CONFIG_FIELDS)
        if unknown:
            raise TypeError(f"ShardLoader got unexpected keyword argument(s): {', '.join(unknown)}")
        self._setup(LoaderConfig(urls=urls, **config), pin_memory, return_batches)  # type: ignore[arg-type]

    @classmethod
    def from_config(cls, config: LoaderConfig) -> ShardLoader:
        """The contract's constructor: yields :class:`Batch` objects."""
        loader = cls.__new__(cls)
        pin = backend(cls.backend).check(config.options)["pin_memory"]
        loader._setup(config, pin, return_batches=True)
        return loader

    def _setup(self, config: LoaderConfig, pin_memory: bool | None, return_batches: bool) -> None:
        self.config = config
        self.urls = config.items()
        check_splittable(len(self.urls), config.world_size, config.workers)
        self.spec = config.pipeline_spec()
        self.workers = config.workers
        self.return_batches = return_batches
        self.dataset = ShardStream(
            self.urls,
            self.spec,
            source=config.source_spec(),
            rank=config.rank,
            world_size=config.world_size,
            objects=config.objects is not None,
        )
        self.stats = StageStats()
        self._cursor = EpochCursor(readers=max(1, config.workers))
        self._fingerprint: dict | None = None
        workers = config.workers
        self._loader = DataLoader(
            self.dataset,
            batch_size=None,
            num_workers=workers,
            prefetch_factor=config.prefetch if workers > 0 else None,
            pin_memory=torch.cuda.is_available() if pin_memory is None else pin_memory,
            worker_init_fn=_quiet_worker if workers > 0 else None,
            persistent_workers=False,
        )

    def _ring(self) -> ShmRing | None:
        """Batch buffers for this epoch's workers, who inherit them by fork (other start methods
        would need them pickled: those workers use torch's per-batch shared memory instead)."""
        if self.workers == 0 or multiprocessing.get_context().get_start_method() != "fork":
            return None
        size = self.spec.augment.size
        # per worker: the batches DataLoader keeps in flight, the one being written, the one the
        # consumer holds and one in the pin-memory thread; a worker finding none free falls back
        return ShmRing(self.workers, self.config.prefetch + 3, self.spec.batch_size * size * size * 3)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs."""
        return self._cursor.next_epoch

    def __iter__(self) -> Iterator:
        # each pass is a new epoch with a new shard order; workers receive epoch and skips when forked
        epoch, skip = self._cursor.begin()
        self.dataset.epoch, self.dataset.skip = epoch, skip
        ring = self._ring()
        self.dataset.ring = ring  # the workers forked below inherit it
        batches = iter(self._loader)
        try:
            for batch in batches:
                batch = batch.received()
                self.stats.merge(batch.stats)
                self._cursor.count(batch)  # before the yield: a state taken now includes this batch
                if batch.images is None:
                    continue
                batch = deliver(batch, self.config)
                yield batch if self.return_batches else (batch.images, batch.labels)
        finally:
            # a worker's error or a consumer that stops early: the workers stop now, not at the next
            # garbage collection (torch's re-raise of a worker error leaves a reference cycle)
            shutdown = getattr(batches, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()
            # held to here: batches in transit find their ring by id, even if another iterator of
            # this loader started meanwhile and replaced dataset.ring
            del ring
        self._cursor.end()
