"""Every setting a loader backend takes, in one place and without torch: training code, the
registry and iobench's sweep-file checks read the same defaults from here.

    cfg = LoaderConfig(urls="/data/train-{000000..000127}.tar", batch_size=256, workers=8)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any, Literal, get_args, overload

from loaders.formats.base import DEFAULT_MAX_MEMBER_BYTES
from loaders.plan import REMAINDER_POLICIES, EpochPlan, expand_urls, plan_epoch, sample_counts
from loaders.storage.spec import CacheSpec, SourceSpec

OnError = Literal["skip", "fail"]  # a corrupt or unlabelled sample: skipped and counted, or fatal
ERROR_POLICIES: tuple[str, ...] = get_args(OnError)


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
    on_error: OnError = "skip"
    drop_last: bool = False
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES
    # False: each sample's bytes are read in full but neither decoded nor augmented, as MLPerf
    # Storage's workloads read; batches then carry the samples' byte lengths, not images
    decode: bool = True
    # CPU milliseconds of extra work per sample, spent in the augment stage on the reader's own
    # thread: a training job's transforms beyond the random resized crop and flip (the sweep file
    # `iobench probe` writes sets it to what the job's readers spent beyond this loader's decode)
    augment_cpu_ms: float = 0.0
    # the same in the decode stage: a job's decoding beyond this loader's (the sweep file `iobench
    # probe` writes puts there what the job's readers spent in their dataset beyond this loader's
    # decode and augment: the probe times a job's __getitem__ whole and names it decode)
    decode_cpu_ms: float = 0.0
    # True: each sample's random-resized-crop box is drawn first and only the box is decoded
    # (libjpeg-turbo's partial decompression, where the loaders' region decoder is built: the same
    # pixels as a whole decode); False: the whole image is decoded, then cropped
    decode_roi: bool = True
    # the loss budget: the fraction of an epoch's samples it may lose (skipped as corrupt, or in a
    # damaged region of a shard) before the loader raises SamplesLostError rather than train on
    # less of the data; None: count and report only (iobench's cells, which say it in the report)
    max_lost_fraction: float | None = 0.001

    @property
    def image_size(self) -> int | None:
        """The side of a batch's images; None for batches of byte lengths (``decode=False``)."""
        return self.augment.size if self.decode else None

    def __post_init__(self) -> None:
        if self.on_error not in ERROR_POLICIES:
            raise ValueError(f"on_error={self.on_error!r}: allowed values are {', '.join(ERROR_POLICIES)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size}: must be at least 1")
        if self.shuffle_buffer < 0:
            raise ValueError(f"shuffle_buffer={self.shuffle_buffer}: must be 0 or more")
        if self.max_lost_fraction is not None and not 0 <= self.max_lost_fraction <= 1:
            raise ValueError(
                f"max_lost_fraction={self.max_lost_fraction}: a fraction of an epoch's samples, 0 to 1 "
                "(None: no budget)"
            )
        for name in ("augment_cpu_ms", "decode_cpu_ms"):
            value = getattr(self, name)
            if not 0 <= value < 10_000:  # also refuses NaN
                raise ValueError(f"{name}={value}: CPU milliseconds per sample, from 0 to under 10,000")


# LoaderConfig's keywords for the source's cache, which nests (SourceSpec.cache)
CACHE_KEYWORDS = {
    "cache_dir": "dir",
    "cache_bytes": "bytes",
    "cache_policy": "policy",
    "cache_verify": "verify",
}


@dataclass(init=False)
class LoaderConfig:
    """Every input a backend needs. Give shard ``urls`` (brace ranges expand), or ``objects`` as
    (key, url, label) with one object per sample. ``source`` says how to read them (a tier's
    description: storage options, deadline, cache, throttle ...), ``pipeline`` what each reader
    does with the samples. ``options`` holds the backend's own settings, declared by each backend
    in the registry (nodes: ``method="process"``; torch: ``pin_memory``; dali: ``mode``).

    Any field of :class:`PipelineSpec` or :class:`~loaders.storage.SourceSpec` may be given here
    by its name, and the cache's as ``cache_dir``, ``cache_bytes``, ``cache_policy``, ``cache_verify``: they go into
    (or over) the nested specs, so training code writes
    ``LoaderConfig(urls=..., batch_size=256, workers=8, cache_dir="/nvme/cache")``."""

    urls: str | Sequence[str] | None = None
    objects: Sequence[tuple[str, str, int]] | None = None
    source: SourceSpec = field(default_factory=SourceSpec)
    pipeline: PipelineSpec = field(default_factory=PipelineSpec)
    workers: int = 2
    prefetch: int = 2
    # None: from an initialised torch.distributed, else torchrun's RANK / WORLD_SIZE, else 0 / 1;
    # a number given here is used as given
    rank: int | None = None
    world_size: int | None = None
    # several ranks: what happens to the samples that do not divide evenly over them (loaders.plan)
    remainder: str = "drop"
    # uint8 on the host stays the default output; with a device the batch is moved there, and
    # normalize=True turns it into normalised float32 on that device (cheap on a GPU, not in workers)
    normalize: bool = False
    device: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __init__(self, urls: str | Sequence[str] | None = None, **settings: Any) -> None:
        unknown = sorted(set(settings) - KEYWORDS)
        if unknown:
            raise TypeError(f"LoaderConfig got unexpected keyword argument(s): {', '.join(unknown)}")
        self.urls = urls
        for f in fields(self):
            if f.name != "urls":
                setattr(self, f.name, settings.pop(f.name) if f.name in settings else _default_of(f))
        self.pipeline = replace(self.pipeline, **_taken(settings, PipelineSpec))
        cache = {CACHE_KEYWORDS[k]: settings.pop(k) for k in list(settings) if k in CACHE_KEYWORDS}
        source = _taken(settings, SourceSpec)
        if cache:
            source["cache"] = _cache(self.source.cache, cache)
        self.source = replace(self.source, **source)
        self._check()

    def _check(self) -> None:
        if (self.urls is None) == (self.objects is None):
            raise ValueError("give shard urls, or objects=[(key, url, label), ...] for one object per sample")
        if self.workers < 0:
            raise ValueError(f"workers={self.workers}: must be 0 or more")
        if self.prefetch < 1:
            raise ValueError(f"prefetch={self.prefetch}: must be 1 or more")
        if self.remainder not in REMAINDER_POLICIES:
            raise ValueError(
                f"remainder={self.remainder!r}: allowed values are {', '.join(REMAINDER_POLICIES)}"
            )
        cache = self.source.cache
        if cache is not None and cache.bytes is None:
            from loaders.storage.shardcache import default_cache_bytes

            # resolved once, here: every reading process then keeps to the same limit
            self.source = replace(self.source, cache=replace(cache, bytes=default_cache_bytes(cache.dir)))

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
        """Samples per item (1 per object), from the source's ``shard_samples`` or, with ``count``,
        counted for local shards from their tar headers; None when some shard's count is not known."""
        items = self.items()
        if self.objects is not None:
            return [1] * len(items)
        known = self.source.shard_samples
        if not count and not all(url in known for url in items):
            return None
        return sample_counts(items, known)

    def split_counts(self, readers: int = 1) -> list[int] | None:
        """The counts the epoch's split over ``readers`` readers per rank needs now: several
        ranks, or fewer shards than readers, split by sample and need every count (local shards
        are counted at once); one rank with a shard per reader reads whole shards and needs them
        only for ``len()``, so it counts nothing until asked."""
        world_size = self.world_size if self.world_size is not None else distributed_ranks()[1]
        return self.counts(count=world_size > 1 or len(self.items()) < readers)


def _default_of(f: Any) -> Any:
    return f.default_factory() if f.default is MISSING else f.default


def _taken(settings: dict[str, Any], spec: type) -> dict[str, Any]:
    """The settings that are fields of ``spec``, taken out of ``settings``."""
    return {f.name: settings.pop(f.name) for f in fields(spec) if f.name in settings}


def _cache(given: CacheSpec | None, settings: dict[str, Any]) -> CacheSpec | None:
    """The source's cache with ``cache_dir``/``cache_bytes``/``cache_policy`` over it; none
    without a directory (``cache_dir=None`` turns a cache off, whatever its limit says)."""
    merged = {**(asdict(given) if given else {}), **settings}
    spec = CacheSpec(**{**merged, "dir": merged.get("dir") or ""})  # checks the policy either way
    return spec if merged.get("dir") else None


KEYWORDS = frozenset(
    [f.name for spec in (LoaderConfig, PipelineSpec, SourceSpec) for f in fields(spec)] + list(CACHE_KEYWORDS)
)


def plan_for(
    config: LoaderConfig, items: Sequence, counts: Sequence[int] | None, epoch: int, readers: int = 1
) -> EpochPlan:
    """This rank's share of ``epoch`` over ``readers`` readers, as ``config`` splits it (its ranks
    resolved: :meth:`LoaderConfig.with_ranks`)."""
    if config.rank is None or config.world_size is None:
        raise TypeError("plan_for needs a config whose ranks are resolved: pass config.with_ranks()")
    return plan_epoch(
        items,
        counts,
        rank=config.rank,
        world_size=config.world_size,
        num_workers=readers,
        batch_size=config.pipeline.batch_size,
        drop_last=config.pipeline.drop_last,
        remainder=config.remainder,
        seed=config.pipeline.seed,
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


@overload
def device_for(device: str) -> str: ...
@overload
def device_for(device: None) -> None: ...
def device_for(device: str | None) -> str | None:
    """``"cuda"`` without an index means this rank's GPU under torchrun (``cuda:LOCAL_RANK``)."""
    if device == "cuda" and local_rank() is not None:
        return f"cuda:{local_rank()}"
    return device


def default(name: str) -> Any:
    """The default of a loader setting (a field of LoaderConfig or of the specs it nests): the one
    place loader defaults are written."""
    f = next(f for spec in (LoaderConfig, PipelineSpec, SourceSpec) for f in fields(spec) if f.name == name)
    return _default_of(f)
