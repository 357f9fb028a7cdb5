"""One loader contract: a config every backend takes, the protocol every backend meets, a registry.

Training code switches backends by name and nothing else::

    from loaders import LoaderConfig, make_loader
    cfg = LoaderConfig(urls="/data/train-{000000..000127}.tar", batch_size=256, workers=8)
    loader = make_loader("nodes", cfg)          # or "torch", or "dali"
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)
        for batch in loader: ...                # loaders.Batch: uint8 images, int64 labels, keys, stats
        torch.save(loader.state_dict(), ...)    # mid-epoch too: a new loader resumes without loss

Built-in backends are import strings, imported on first use, so an optional dependency (torchdata,
DALI) costs nothing until it is asked for and then fails with an install hint.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import torch

from .assemble import Batch
from .decode import AugmentSpec, normalize_batch
from .instrument import StageStats
from .pipeline import PipelineSpec
from .shards import expand_urls
from .sources import SourceSpec, default_cache_bytes
from .tario import DEFAULT_MAX_MEMBER_BYTES
from .throttle import ThrottleSpec

STATE_VERSION = 1


@dataclass
class LoaderConfig:
    """Every input a backend needs. Give shard ``urls`` (brace ranges expand), or ``objects`` as
    (key, url, label) with one object per sample. ``options`` holds backend-specific settings
    (nodes: ``method="process"``; torch: ``pin_memory``)."""

    urls: str | Sequence[str] | None = None
    objects: Sequence[tuple[str, str, int]] | None = None
    storage_options: dict = field(default_factory=dict, repr=False)  # may hold credentials
    cache_dir: str | None = None
    cache_bytes: int | None = None
    shard_sizes: dict[str, int] = field(default_factory=dict)
    part_bytes: int = 8 * 2**20
    concurrency: int = 4
    throttle: ThrottleSpec | None = None  # emulate a slower link (bandwidth cap, latency per request)
    batch_size: int = 64
    workers: int = 2
    prefetch: int = 2
    shuffle_buffer: int = 1000
    seed: int = 0
    rank: int = 0
    world_size: int = 1
    augment: AugmentSpec = field(default_factory=AugmentSpec)
    on_error: str = "skip"
    drop_last: bool = False
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES
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

    def pipeline_spec(self) -> PipelineSpec:
        return PipelineSpec(
            batch_size=self.batch_size,
            shuffle_buffer=self.shuffle_buffer,
            seed=self.seed,
            augment=self.augment,
            on_error=self.on_error,
            drop_last=self.drop_last,
            max_member_bytes=self.max_member_bytes,
        )

    def source_spec(self) -> SourceSpec:
        cache_bytes = self.cache_bytes
        if self.cache_dir and not cache_bytes:
            cache_bytes = default_cache_bytes(self.cache_dir)
        return SourceSpec(
            storage_options=dict(self.storage_options or {}),
            cache_dir=self.cache_dir,
            cache_bytes=cache_bytes,
            sizes=dict(self.shard_sizes or {}),
            part_bytes=self.part_bytes,
            concurrency=self.concurrency,
            throttle=self.throttle,
        )


@runtime_checkable
class Loader(Protocol):
    """What every backend provides. Iterating runs one epoch (the one ``set_epoch`` chose, else the
    next) and yields :class:`loaders.Batch`; ``state_dict()`` taken after k batches lets a new loader
    built from the same config continue that epoch with no sample lost or repeated."""

    stats: StageStats

    def __iter__(self) -> Iterator[Batch]: ...

    def set_epoch(self, epoch: int) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


LoaderFactory = Callable[[LoaderConfig], Loader]

_BUILTIN: dict[str, tuple[str, str]] = {
    # name -> (module:attribute, install hint)
    "torch": ("loaders.torch_loader:ShardLoader.from_config", "pip install torch"),
    "nodes": ("loaders.nodes_loader:NodesLoader", "pip install 'iobench[torchdata]'"),
    "dali": ("loaders.dali_loader:DaliLoader", "pip install 'iobench[dali]'"),
}
_REGISTERED: dict[str, LoaderFactory] = {}


def register_loader(name: str, factory: LoaderFactory) -> None:
    """Add (or replace) a backend: ``factory(config)`` returns an object meeting :class:`Loader`."""
    if not callable(factory):
        raise TypeError(f"loader factory for {name!r} is not callable")
    _REGISTERED[name] = factory


def available_loaders() -> list[str]:
    """Every name make_loader accepts (built-ins whose dependency is missing included)."""
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def _resolve(name: str) -> LoaderFactory:
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in _BUILTIN:
        raise ValueError(f"loader {name!r}: known loaders are {', '.join(available_loaders())}")
    target, hint = _BUILTIN[name]
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"the {name!r} loader needs an optional dependency: {hint} ({exc})") from exc
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def make_loader(name: str, config: LoaderConfig) -> Loader:
    """Build the backend called ``name`` ("torch", "nodes", "dali", or a registered one)."""
    return _resolve(name)(config)


# -- helpers the backends share -------------------------------------------------------------------


def deliver(batch: Batch, config: LoaderConfig) -> Batch:
    """Move a batch to ``config.device`` and normalise it there when asked; else leave it uint8."""
    if batch.images is None or (config.device is None and not config.normalize):
        return batch
    images, labels = batch.images, batch.labels
    if config.device is not None:
        device = torch.device(config.device)
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)  # type: ignore[union-attr]
    if config.normalize:
        images = normalize_batch(images).contiguous(memory_format=torch.channels_last)
    return replace(batch, images=images, labels=labels)


def fingerprint(config: LoaderConfig, readers: int, backend: str) -> dict:
    """What must not change between saving and loading a state: the per-reader sample order."""
    digest = hashlib.sha1()
    for item in config.items():
        digest.update(repr(item).encode())
        digest.update(b"\0")
    return {
        "backend": backend,
        "items": digest.hexdigest(),
        "seed": config.seed,
        "shuffle_buffer": config.shuffle_buffer,
        "rank": config.rank,
        "world_size": config.world_size,
        "readers": readers,
    }


class EpochCursor:
    """Where a loader stands: the epoch it is in and how many samples of each reader's shuffled
    stream the consumer has received (counted from delivered batches, so batches a worker had
    prefetched but not handed over are produced again after a resume)."""

    def __init__(self, readers: int) -> None:
        self.readers = readers
        self.next_epoch = 0
        self.active: int | None = None
        self.consumed = [0] * readers
        self._resume: tuple[int, list[int]] | None = None

    def set_epoch(self, epoch: int) -> None:
        if self._resume is not None and self._resume[0] != epoch:
            self._resume = None  # the saved position belongs to another epoch
        self.next_epoch = epoch

    def begin(self) -> tuple[int, list[int]]:
        """Start an epoch: its number and the samples each reader must skip."""
        epoch = self.next_epoch
        skip = [0] * self.readers
        if self._resume is not None and self._resume[0] == epoch:
            skip = list(self._resume[1])
        self._resume = None
        self.active, self.consumed, self.next_epoch = epoch, list(skip), epoch + 1
        return epoch, skip

    def count(self, batch: Batch) -> None:
        self.consumed[batch.reader] += batch.consumed

    def end(self) -> None:
        self.active = None

    def state(self, fp: dict) -> dict:
        if self.active is not None:
            epoch, consumed = self.active, list(self.consumed)
        elif self._resume is not None:
            epoch, consumed = self._resume[0], list(self._resume[1])
        else:
            epoch, consumed = self.next_epoch, [0] * self.readers
        return {"version": STATE_VERSION, "epoch": epoch, "consumed": consumed, "fingerprint": fp}

    def load(self, state: dict, fp: dict) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"loader state version {state.get('version')!r}: expected {STATE_VERSION}")
        saved = state["fingerprint"]
        changed = sorted(k for k in fp if saved.get(k) != fp[k])
        if changed:
            raise ValueError(
                f"loader state was saved with different {', '.join(changed)}: "
                f"resuming would repeat or lose samples ({ {k: saved.get(k) for k in changed} } now "
                f"{ {k: fp[k] for k in changed} })"
            )
        consumed = [int(n) for n in state["consumed"]]
        self.next_epoch = int(state["epoch"])
        self.active = None
        self._resume = (self.next_epoch, consumed)


class ResumableLoader:
    """set_epoch / state_dict / load_state_dict for a backend that keeps an ``EpochCursor`` in
    ``_cursor``, its ``LoaderConfig`` in ``config`` and names itself in ``backend``."""

    backend: str
    config: LoaderConfig
    _cursor: EpochCursor
    _fingerprint: dict | None = None

    def set_epoch(self, epoch: int) -> None:
        self._cursor.set_epoch(epoch)

    def state_dict(self) -> dict:
        return self._cursor.state(self._fp())

    def load_state_dict(self, state: dict) -> None:
        self._cursor.load(state, self._fp())

    def _fp(self) -> dict:
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.config, self._cursor.readers, self.backend)
        return self._fingerprint
