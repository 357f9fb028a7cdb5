"""Every setting a loader backend takes, in one place and without torch: training code, the
registry and iobench's sweep-file checks read the same defaults from here.

    cfg = LoaderConfig(urls="/data/train-{000000..000127}.tar", batch_size=256, workers=8)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from loaders.formats.tar import DEFAULT_MAX_MEMBER_BYTES
from loaders.plan import REMAINDER_POLICIES, EpochPlan, expand_urls, plan_epoch, sample_counts
from loaders.storage.throttle import ThrottleSpec

if TYPE_CHECKING:
    from loaders.storage.sources import SourceSpec

ERROR_POLICIES = ("skip", "fail")


@dataclass(frozen=True)
class AugmentSpec:
    """RandomResizedCrop + horizontal flip, torchvision's defaults."""

    size: int = 224
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip: bool = True


@dataclass(frozen=True)
class PipelineSpec:
    """What every backend's sample pipeline does per reader: batch, shuffle, augment, errors."""

    batch_size: int = 64
    shuffle_buffer: int = 1000
    seed: int = 0
    augment: AugmentSpec = field(default_factory=AugmentSpec)
    on_error: str = "skip"
    drop_last: bool = False
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES
    # False: each sample's bytes are read in full but neither decoded nor augmented, as MLPerf
    # Storage's workloads read; batches then carry the samples' byte lengths, not images
    decode: bool = True

    @property
    def image_size(self) -> int | None:
        """The side of a batch's images; None for batches of byte lengths (``decode=False``)."""
        return self.augment.size if self.decode else None

    def __post_init__(self) -> None:
        if self.on_error not in ERROR_POLICIES:
            raise ValueError(f"on_error={self.on_error!r}: allowed values are {', '.join(ERROR_POLICIES)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size}: must be at least 1")


@dataclass
class LoaderConfig:
    """Every input a backend needs. Give shard ``urls`` (brace ranges expand), or ``objects`` as
    (key, url, label) with one object per sample. ``options`` holds the backend's own settings,
    declared by each backend in the registry (nodes: ``method="process"``; torch: ``pin_memory``;
    dali: ``mode``)."""

    urls: str | Sequence[str] | None = None
    objects: Sequence[tuple[str, str, int]] | None = None
    storage_options: dict = field(default_factory=dict, repr=False)  # may hold credentials
    cache_dir: str | None = None
    cache_bytes: int | None = None
    # a cache smaller than the data: "static" keeps what it cached and reads the rest through,
    # "lru" evicts; "auto" (default) is static when shard_sizes add up to more than the cache
    cache_policy: str = "auto"
    shard_sizes: dict[str, int] = field(default_factory=dict)
    # samples per shard URL (the dataset manifest's counts): the even split over ranks and an exact
    # len() need them; local shards missing here are counted from their tar headers
    shard_samples: dict[str, int] = field(default_factory=dict)
    part_bytes: int = 8 * 2**20
    concurrency: int = 4
    throttle: ThrottleSpec | None = None  # emulate a slower link (bandwidth cap, latency per request)
    batch_size: int = 64
    workers: int = 2
    prefetch: int = 2
    shuffle_buffer: int = 1000
    seed: int = 0
    # None: from an initialised torch.distributed, else torchrun's RANK / WORLD_SIZE, else 0 / 1;
    # a number given here is used as given
    rank: int | None = None
    world_size: int | None = None
    # several ranks: what happens to the samples that do not divide evenly over them (loaders.plan)
    remainder: str = "drop"
    augment: AugmentSpec = field(default_factory=AugmentSpec)
    on_error: str = "skip"
    drop_last: bool = False
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES
    # False: read each sample's bytes in full without decoding them (MLPerf Storage's reading);
    # batches carry ``sizes`` (bytes per sample) and no images. Backends that declare it only.
    decode: bool = True
    # uint8 on the host stays the default output; with a device the batch is moved there, and
    # normalize=True turns it into normalised float32 on that device (cheap on a GPU, not in workers)
    normalize: bool = False
    device: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.urls is None) == (self.objects is None):
            raise ValueError("give shard urls, or objects=[(key, url, label), ...] for one object per sample")
        if self.workers < 0:
            raise ValueError(f"workers={self.workers}: must be 0 or more")
        if self.cache_policy not in ("auto", "lru", "static"):
            raise ValueError(f"cache_policy={self.cache_policy!r}: allowed values are auto, lru, static")
        if self.remainder not in REMAINDER_POLICIES:
            raise ValueError(
                f"remainder={self.remainder!r}: allowed values are {', '.join(REMAINDER_POLICIES)}"
            )
        self.pipeline_spec()  # validates batch_size and on_error now, not in a worker later

    @property
    def layout(self) -> str:
        return "objects" if self.objects is not None else "shards"

    def items(self) -> list:
        """Shard URLs (expanded) or the (key, url, label) list."""
        items = expand_urls(self.urls) if self.urls is not None else list(self.objects or [])
        if not items:
            raise ValueError("no shard URLs or sample objects given")
        return items

    def with_ranks(self) -> LoaderConfig:
        """This config with ``rank`` and ``world_size`` resolved (see :func:`distributed_ranks`)."""
        rank, world_size = distributed_ranks(self.rank, self.world_size)
        return replace(self, rank=rank, world_size=world_size)

    def counts(self, *, count: bool = True) -> list[int] | None:
        """Samples per item (1 per object), from ``shard_samples`` or, with ``count``, counted for
        local shards from their tar headers; None when some shard's count is not known."""
        items = self.items()
        if self.objects is not None:
            return [1] * len(items)
        known = self.shard_samples or {}
        if not count and not all(url in known for url in items):
            return None
        return sample_counts(items, known)

    def split_counts(self) -> list[int] | None:
        """The counts the epoch's split needs now: several ranks split by sample and need every
        count (local shards are counted at once); one rank reads whole shards and needs them only
        for ``len()``, so it counts nothing until asked."""
        world_size = self.world_size if self.world_size is not None else distributed_ranks()[1]
        return self.counts(count=world_size > 1)

    def pipeline_spec(self) -> PipelineSpec:
        return PipelineSpec(
            batch_size=self.batch_size,
            shuffle_buffer=self.shuffle_buffer,
            seed=self.seed,
            augment=self.augment,
            on_error=self.on_error,
            drop_last=self.drop_last,
            max_member_bytes=self.max_member_bytes,
            decode=self.decode,
        )

    def source_spec(self) -> SourceSpec:
        from loaders.storage.sources import (  # fsspec loads with the first reader
            SourceSpec,
            default_cache_bytes,
        )

        cache_bytes = self.cache_bytes
        if self.cache_dir and not cache_bytes:
            cache_bytes = default_cache_bytes(self.cache_dir)
        return SourceSpec(
            storage_options=dict(self.storage_options or {}),
            cache_dir=self.cache_dir,
            cache_bytes=cache_bytes,
            cache_policy=self.cache_policy,
            sizes=dict(self.shard_sizes or {}),
            part_bytes=self.part_bytes,
            concurrency=self.concurrency,
            throttle=self.throttle,
        )


def plan_for(
    config: LoaderConfig, items: Sequence, counts: Sequence[int] | None, epoch: int, readers: int = 1
) -> EpochPlan:
    """This rank's share of ``epoch`` over ``readers`` readers, as ``config`` splits it."""
    return plan_epoch(
        items,
        counts,
        rank=config.rank,  # type: ignore[arg-type]
        world_size=config.world_size,  # type: ignore[arg-type]
        num_workers=readers,
        batch_size=config.batch_size,
        drop_last=config.drop_last,
        remainder=config.remainder,
        seed=config.seed,
        epoch=epoch,
        objects=config.objects is not None,
    )


def distributed_ranks(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """(rank, world size): those given; the missing ones from an initialised ``torch.distributed``,
    else from torchrun's environment (``RANK``, ``WORLD_SIZE``), else 0 and 1. torch is not
    imported for this: a process group can only exist if the training code imported it."""
    if rank is None or world_size is None:
        found_rank, found_world = 0, 1
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            found_rank, found_world = dist.get_rank(), dist.get_world_size()
        elif "WORLD_SIZE" in os.environ:
            found_rank, found_world = int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
        rank = found_rank if rank is None else rank
        world_size = found_world if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    return rank, world_size


def local_rank() -> int | None:
    """This process's GPU index on its node under torchrun (``LOCAL_RANK``); None elsewhere."""
    value = os.environ.get("LOCAL_RANK")
    return int(value) if value is not None and value.isdigit() else None


def device_for(device: str | None) -> str | None:
    """``"cuda"`` without an index means this rank's GPU under torchrun (``cuda:LOCAL_RANK``)."""
    if device == "cuda" and local_rank() is not None:
        return f"cuda:{local_rank()}"
    return device


def default(name: str) -> Any:
    """The default of one LoaderConfig field: the one place loader defaults are written."""
    f = next(f for f in fields(LoaderConfig) if f.name == name)
    return f.default
