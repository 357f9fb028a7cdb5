"""The loader contract: the protocol every backend meets, and what backends share to meet it (the
epoch cursor that makes them resumable, delivery to a device; the skeleton built on them is
loaders/backends/skeleton.py). The settings are ``LoaderConfig``
(config.py); the backends by name are the registry (registry.py).

Training code switches backends by name and nothing else::

    from loaders import LoaderConfig, make_loader
    cfg = LoaderConfig(urls="/data/train-{000000..000127}.tar", batch_size=256, workers=8)
    loader = make_loader("nodes", cfg)          # or "torch", or "dali"
    for epoch in range(start, epochs):
        loader.set_epoch(epoch)
        for batch in loader: ...                # loaders.Batch: uint8 images, int64 labels, keys
        torch.save(loader.state_dict(), ...)    # mid-epoch too: a new loader goes on exactly there
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

import torch

from loaders.config import LoaderConfig, device_for
from loaders.observe.stages import StageStats
from loaders.pipeline.batch import Batch
from loaders.pipeline.decode import normalize_batch
from loaders.pipeline.node import plain

# 2: the even split over ranks, and batches delivered per reader; 3: each reader's pipeline state
STATE_VERSION = 3


@runtime_checkable
class Loader(Protocol):
    """What every backend provides. Iterating runs one epoch (the one ``set_epoch`` chose, else the
    next) and yields :class:`loaders.Batch`; ``state_dict()`` taken after k batches lets a new loader
    built from the same config continue that epoch with no sample lost or repeated (the built-in
    backends: exactly the batches the first would have gone on with)."""

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
    assert labels is not None  # a batch with images has their labels (Batch's invariant)
    if config.device is not None:
        device = torch.device(device_for(config.device))
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
    if config.normalize:
        images = normalize_batch(images).contiguous(memory_format=torch.channels_last)
    return batch.with_data(images=images, labels=labels)


def fingerprint(config: LoaderConfig, readers: int, backend: str) -> dict:
    """What must not change between saving and loading a state: the per-reader sample order (which
    depends, with several ranks, on the batch size, drop_last and the remainder policy too)."""
    digest = hashlib.sha1()
    for item in config.items():
        digest.update(repr(item).encode())
        digest.update(b"\0")
    return {
        "batch_size": config.pipeline.batch_size,
        "drop_last": config.pipeline.drop_last,
        "remainder": config.remainder,
        "backend": backend,
        "items": digest.hexdigest(),
        "seed": config.pipeline.seed,
        "shuffle_buffer": config.pipeline.shuffle_buffer,
        "rank": config.rank,
        "world_size": config.world_size,
        "readers": readers,
    }


class EpochCursor:
    """Where a loader stands: the epoch it is in, each reader's pipeline state after the last of
    its batches the consumer received (counted from delivered batches, so batches a worker had
    prefetched but not handed over are made again after a resume), and how many batches the epoch
    has delivered."""

    def __init__(self, readers: int) -> None:
        self.readers = readers
        self.next_epoch = 0
        self.active: int | None = None
        self.states: list[dict[str, Any] | None] = [None] * readers
        self.delivered = 0
        self._resume: tuple[int, list[dict[str, Any] | None], int] | None = None

    def set_epoch(self, epoch: int) -> None:
        if self._resume is not None and self._resume[0] != epoch:
            self._resume = None  # the saved position belongs to another epoch
        self.next_epoch = epoch

    def begin(self) -> tuple[int, list[dict[str, Any] | None] | None]:
        """Start an epoch: its number, and where each reader resumes (None: the epoch from its start)."""
        epoch, resumed = self.next_epoch, None
        self.states, self.delivered = [None] * self.readers, 0
        if self._resume is not None and self._resume[0] == epoch:
            _, resumed, self.delivered = self._resume
            self.states = list(resumed)
        self._resume = None
        self.active, self.next_epoch = epoch, epoch + 1
        return epoch, resumed

    def count(self, batch: Batch) -> None:
        if batch.bookkeeping.resume is not None:
            self.states[batch.bookkeeping.reader] = batch.bookkeeping.resume
        self.delivered += batch.delivers

    def end(self) -> None:
        self.active = None

    def state(self, fp: dict) -> dict:
        if self.active is not None:
            epoch, states, delivered = self.active, list(self.states), self.delivered
        elif self._resume is not None:
            epoch, states, delivered = self._resume[0], list(self._resume[1]), self._resume[2]
        else:
            epoch, states, delivered = self.next_epoch, [None] * self.readers, 0
        return {
            "version": STATE_VERSION,
            "epoch": epoch,
            "readers": plain(states),
            "delivered": delivered,
            "fingerprint": fp,
        }

    def load(self, state: dict, fp: dict) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(
                f"loader state version {state.get('version')!r}: expected {STATE_VERSION} (a state saved "
                "by another version of the loaders cannot be resumed exactly)"
            )
        saved = state["fingerprint"]
        changed = sorted(k for k in fp if saved.get(k) != fp[k])
        if changed:
            raise ValueError(
                f"loader state was saved with different {', '.join(changed)}: "
                f"resuming would repeat or lose samples ({ {k: saved.get(k) for k in changed} } now "
                f"{ {k: fp[k] for k in changed} })"
            )
        self.next_epoch = int(state["epoch"])
        self.active = None
        self._resume = (self.next_epoch, list(state["readers"]), int(state["delivered"]))
