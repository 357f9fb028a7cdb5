"""What every loader backend yields: a :class:`Batch` (what training code uses: images, labels,
keys) and, apart in its :class:`Bookkeeping`, what training code does not need (the stage
counters, who made it and when, where its reader stood after it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from loaders.observe.stages import StageStats


@dataclass
class Bookkeeping:
    """A batch's bookkeeping: read by iobench and by the loader itself, never needed to train."""

    stats: StageStats = field(default_factory=StageStats)
    reader: int = 0  # which reader (DataLoader worker, thread) made it
    epoch: int = 0
    # when its reader began and finished making it (time.perf_counter, one clock for every process
    # on the host): the production times a model of the loader's queue replays (iobench's scale model)
    made: tuple[float, float] | None = None
    # each of its samples' reads, where they are made ahead of the pipeline (one object per sample,
    # reads in flight): when it was asked for and when its bytes were in (time.perf_counter); None:
    # read as it went. The first reads of a batch are asked for while the batch before it is
    # finished and run on while the reader waits to be asked for it: iobench's scale model replays that
    reads: tuple[tuple[float, float], ...] | None = None
    # its reader's pipeline state right after it (a node's state_dict): a loader resumed from it
    # goes on with the next batch exactly, reading nothing again that was delivered
    resume: dict[str, Any] | None = None


class Batch:
    """A batch: ``images`` N x 3 x H x W uint8 (channels_last), ``labels`` int64, ``keys``; or,
    read without decoding (``decode=False``), no images but each sample's byte length (``sizes``,
    int64), so nothing passes for an image that was never decoded. ``data`` is what a training step
    consumes (the images, else the sizes); ``len(batch)`` its samples.

    The rest is in ``bookkeeping``; ``stats``, ``reader``, ``made`` and ``reads`` read it from the
    batch too (iobench's step loop does)."""

    def __init__(
        self,
        images: torch.Tensor | None,
        labels: torch.Tensor | None,
        keys: Sequence[str] = (),
        *,
        sizes: torch.Tensor | None = None,
        stats: StageStats | None = None,
        bookkeeping: Bookkeeping | None = None,
    ) -> None:
        self.images, self.labels, self.keys, self.sizes = images, labels, list(keys), sizes
        self.bookkeeping = bookkeeping if bookkeeping is not None else Bookkeeping()
        if stats is not None:
            self.bookkeeping.stats = stats

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        shape = tuple(self.data.shape) if self.data is not None else None
        return f"Batch({len(self)} samples, data {shape}, reader {self.bookkeeping.reader}, epoch {self.bookkeeping.epoch})"

    @property
    def data(self) -> torch.Tensor | None:
        """What a training step consumes: the images, or the byte lengths of a batch not decoded."""
        return self.images if self.images is not None else self.sizes

    @property
    def delivers(self) -> bool:
        """A batch the consumer receives (a training step), as opposed to one carrying only counters
        (a dropped partial batch's)."""
        return self.images is not None or self.sizes is not None

    @property
    def stats(self) -> StageStats:
        return self.bookkeeping.stats

    @property
    def reader(self) -> int:
        return self.bookkeeping.reader

    @property
    def made(self) -> tuple[float, float] | None:
        return self.bookkeeping.made

    @property
    def reads(self) -> tuple[tuple[float, float], ...] | None:
        return self.bookkeeping.reads

    def with_data(self, **changed: torch.Tensor | None) -> Batch:
        """This batch with other tensors (moved, normalised, pinned), the same keys and bookkeeping."""
        fields = {"images": self.images, "labels": self.labels, "sizes": self.sizes, **changed}
        return Batch(
            fields["images"], fields["labels"], self.keys, sizes=fields["sizes"], bookkeeping=self.bookkeeping
        )

    @classmethod
    def empty(cls, image_size: int | None, bookkeeping: Bookkeeping | None = None) -> Batch:
        """A batch of no samples: what a reader yields when skipped samples left it short of the
        batches its plan promised, so that every rank still takes the same number of steps.
        ``image_size`` None: a batch of byte lengths (read without decoding)."""
        labels = torch.empty(0, dtype=torch.int64)
        if image_size is None:
            return cls(None, labels, sizes=torch.empty(0, dtype=torch.int64), bookkeeping=bookkeeping)
        images = torch.empty((0, image_size, image_size, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
        return cls(images, labels, bookkeeping=bookkeeping)

    def pin_memory(self) -> Batch:
        """Called by DataLoader(pin_memory=True) and torchdata's PinMemory for custom batch types."""
        if self.images is None:
            return self
        assert self.labels is not None  # a batch with images has their labels
        return self.with_data(images=self.images.pin_memory(), labels=self.labels.pin_memory())
