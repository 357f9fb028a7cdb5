"""The loader contract: the protocol every backend meets, and what backends share to meet it (the
skeleton that owns ranks, plan, len(), resume and stats; the epoch cursor; delivery to a device). The settings are ``LoaderConfig``
(config.py); the backends by name are the registry (registry.py).

Training code switches backends by name and nothing else::

    from loaders import LoaderConfig, make_loader
    cfg = LoaderConfig(urls="/data/train-{000000..000127}.tar", batch_size=256, workers=8)
    loader = make_loader("nodes", cfg)          # or "torch", or "dali"
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)
        for batch in loader: ...                # loaders.Batch: uint8 images, int64 labels, keys, stats
        torch.save(loader.state_dict(), ...)    # mid-epoch too: a new loader resumes without loss
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import torch

from loaders import registry
from loaders.config import LoaderConfig, device_for
from loaders.observe.stages import StageStats
from loaders.pipeline.assemble import Batch
from loaders.pipeline.decode import normalize_batch
from loaders.plan import EpochPlan, batches_of, check_splittable, plan_for

if TYPE_CHECKING:
    from loaders.storage.sources import SourceSpec

_Loader = TypeVar("_Loader", bound="BaseLoader")

STATE_VERSION = 2  # 2: the even split over ranks, and batches delivered per reader


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


# -- helpers the backends share -------------------------------------------------------------------


def deliver(batch: Batch, config: LoaderConfig) -> Batch:
    """Move a batch to ``config.device`` and normalise it there when asked; else leave it uint8."""
    if batch.images is None or (config.device is None and not config.normalize):
        return batch
    images, labels = batch.images, batch.labels
    if config.device is not None:
        device = torch.device(device_for(config.device))
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)  # type: ignore[union-attr]
    if config.normalize:
        images = normalize_batch(images).contiguous(memory_format=torch.channels_last)
    return replace(batch, images=images, labels=labels)


def fingerprint(config: LoaderConfig, readers: int, backend: str) -> dict:
    """What must not change between saving and loading a state: the per-reader sample order (which
    depends, with several ranks, on the batch size, drop_last and the remainder policy too)."""
    spec = config.pipeline_spec()
    digest = hashlib.sha1()
    for item in config.items():
        digest.update(repr(item).encode())
        digest.update(b"\0")
    return {
        "batch_size": spec.batch_size,
        "drop_last": spec.drop_last,
        "remainder": config.remainder,
        "backend": backend,
        "items": digest.hexdigest(),
        "seed": spec.seed,
        "shuffle_buffer": spec.shuffle_buffer,
        "rank": config.rank,
        "world_size": config.world_size,
        "readers": readers,
    }


class EpochCursor:
    """Where a loader stands: the epoch it is in and how many samples of each reader's shuffled
    stream the consumer has received (counted from delivered batches, so batches a worker had
    prefetched but not handed over are produced again after a resume), and how many batches each
    reader delivered (a resumed reader still yields the batches its plan promised, no more)."""

    def __init__(self, readers: int) -> None:
        self.readers = readers
        self.next_epoch = 0
        self.active: int | None = None
        self.consumed = [0] * readers
        self.batches = [0] * readers
        self._resume: tuple[int, list[int], list[int]] | None = None

    def set_epoch(self, epoch: int) -> None:
        if self._resume is not None and self._resume[0] != epoch:
            self._resume = None  # the saved position belongs to another epoch
        self.next_epoch = epoch

    def begin(self) -> tuple[int, list[int]]:
        """Start an epoch: its number and the samples each reader must skip (the batches each
        reader already delivered are in ``batches``)."""
        epoch = self.next_epoch
        skip, done = [0] * self.readers, [0] * self.readers
        if self._resume is not None and self._resume[0] == epoch:
            skip, done = list(self._resume[1]), list(self._resume[2])
        self._resume = None
        self.active, self.consumed, self.batches, self.next_epoch = epoch, list(skip), list(done), epoch + 1
        return epoch, skip

    def count(self, batch: Batch) -> None:
        self.consumed[batch.reader] += batch.consumed
        if batch.delivers:
            self.batches[batch.reader] += 1

    def end(self) -> None:
        self.active = None

    def state(self, fp: dict) -> dict:
        if self.active is not None:
            epoch, consumed, batches = self.active, list(self.consumed), list(self.batches)
        elif self._resume is not None:
            epoch, consumed, batches = self._resume[0], list(self._resume[1]), list(self._resume[2])
        else:
            epoch, consumed, batches = self.next_epoch, [0] * self.readers, [0] * self.readers
        return {
            "version": STATE_VERSION,
            "epoch": epoch,
            "consumed": consumed,
            "batches": batches,
            "fingerprint": fp,
        }

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
        batches = [int(n) for n in state.get("batches", [0] * len(consumed))]
        self.next_epoch = int(state["epoch"])
        self.active = None
        self._resume = (self.next_epoch, consumed, batches)


class BaseLoader:
    """The skeleton of every built-in backend (after torchdata.nodes' BaseNode: a subclass writes
    its epoch, the base does the rest). Its one constructor takes a :class:`LoaderConfig` and owns:

    - the config, its options checked once against the backend's declared ones, ranks resolved;
    - the plan: this rank's share of each epoch over ``readers`` readers (:func:`plan_for`), epoch 0
      planned at once, so data that cannot give every rank a batch is refused here, not in a worker;
    - ``len()``: the batches of the current (or next) epoch, one rank's shards counted when first asked;
    - resume: the epoch cursor (``set_epoch``, ``state_dict``, ``load_state_dict``), which counts
      every batch the backend hands on before the consumer gets it;
    - ``stats``: every batch's counters, merged.

    A backend names itself (``backend``, its registry name) and writes ``_epoch``; where it needs to,
    ``_readers`` (default one reader), ``_build`` (its machinery, once the plan is known),
    ``_deliver`` (default :func:`deliver`), ``merged`` and ``close``.
    """

    backend: str
    # the readers' samples merge into one stream before they are batched (DALI's feed): the cursor
    # counts that one stream, and len() batches the rank's samples as one
    merged: bool = False

    def __init__(self, config: LoaderConfig) -> None:
        config = registry.backend(self.backend).checked(config).with_ranks()
        self.config = config
        self.items = config.items()
        self.spec = config.pipeline_spec()
        self.stats = StageStats()
        self._plan: EpochPlan | None = None
        self._fingerprint: dict | None = None
        self.readers = self._readers()
        if self.readers is not None:
            check_splittable(len(self.items), config.world_size, self.readers)  # type: ignore[arg-type]
            self.plan(0)
        self._cursor = EpochCursor(1 if self.merged or self.readers is None else self.readers)
        self._build()

    # -- what a backend writes --------------------------------------------------------------------

    def _readers(self) -> int | None:
        """How many readers share this rank's epoch (the plan's); None where the backend's own
        reader splits it (DALI's reader modes: no plan, and the backend writes ``__len__``)."""
        return 1

    def _build(self) -> None:
        """The backend's machinery (a DataLoader, a feed), made once the plan is known."""

    def _epoch(self, epoch: int, skip: list[int], done: list[int]) -> Iterator[Batch]:
        """Every batch of ``epoch``, each tagged with its reader and the samples of that reader's
        stream it used up (``consumed``); reader r first skips ``skip[r]`` samples, and has
        delivered ``done[r]`` batches already (a resumed epoch). Cleans up when closed early."""
        raise NotImplementedError

    def _deliver(self, batch: Batch) -> Any:
        """What the consumer receives for a counted batch."""
        return deliver(batch, self.config)

    def close(self) -> None:
        """Release what the backend holds now (workers, clients); by default nothing."""

    # -- what the skeleton does -------------------------------------------------------------------

    def __iter__(self) -> Iterator:
        epoch, skip = self._cursor.begin()
        batches = self._epoch(epoch, skip, list(self._cursor.batches))
        try:
            for batch in batches:
                self.stats.merge(batch.stats)
                self._cursor.count(batch)  # before the yield: a state taken now includes this batch
                if batch.delivers:
                    yield self._deliver(batch)
        finally:
            batches.close()  # an epoch left half-read: the backend's clean-up runs now, not at gc
        self._cursor.end()

    @cached_property
    def counts(self) -> list[int] | None:
        """Samples per item as the split needs them now (``LoaderConfig.split_counts``)."""
        return self.config.split_counts()

    @cached_property
    def source_spec(self) -> SourceSpec:
        """How this loader reads its shards, made once (the cache's default size reads the disk)."""
        return self.config.source_spec()

    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs."""
        return self._cursor.next_epoch

    def plan(self, epoch: int | None = None, readers: int | None = None) -> EpochPlan:
        """Which samples each reader of this rank reads in ``epoch`` (default: the current or next
        one), over ``readers`` readers (default: the loader's); the last plan asked for is kept."""
        if epoch is None:
            epoch = self._cursor.active if self._cursor.active is not None else self._cursor.next_epoch
        readers = readers or self.readers or 1
        if self._plan is None or self._plan.epoch != epoch or len(self._plan.readers) != readers:
            self._plan = plan_for(self.config, self.items, self.counts, epoch, readers)
        return self._plan

    def __len__(self) -> int:
        """The batches this rank yields in the current (or next) epoch: the same on every rank."""
        if self.counts is None:  # one rank: its shards are counted when first asked
            try:
                self.counts = self.config.counts()
            except (OSError, ValueError) as exc:
                # list(loader) asks len() for a hint and goes on; reading a shard that cannot be
                # counted then fails under the loader's own error policy, in the reader that reads it
                raise TypeError(f"len() could not count the shards' samples: {exc}") from exc
            self._plan = None
        plan = self.plan().counted()
        if self.merged:
            return batches_of(plan.samples, self.spec.batch_size, self.spec.drop_last)  # type: ignore[arg-type]
        return plan.batches  # type: ignore[return-value]

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

    def __enter__(self: _Loader) -> _Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
