"""Collating without copies: each sample's crop is written straight into its slot of the batch.

A stack of 64 crops of 224 x 224 costs a 9.6 MB copy, and a DataLoader worker then copies the
stacked batch once more into shared memory to send it: together about 7 % of the CPU time a sample
costs here (measured, docs/benchmarks.md). The assembler allocates the batch buffer first (in
shared memory inside a DataLoader worker, as torch's own default_collate does) and hands augment
one slot at a time, so a full batch is already collated and already shareable.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from loaders.observe.stages import StageStats, Stopwatch
from loaders.pipeline.batch import Batch


class BatchBuffers(Protocol):
    """Where a batch's image buffer lives: plain memory (the default), or memory shared with the
    process the batch goes to (a DataLoader worker's: shmring.SharedBuffers)."""

    def allocate(self, shape: tuple[int, ...], stats: StageStats) -> torch.Tensor: ...

    def release(self, images: torch.Tensor) -> None:
        """A buffer whose batch is not delivered (a dropped partial batch): free for the next."""
        ...


class PlainBuffers:
    def allocate(self, shape: tuple[int, ...], stats: StageStats) -> torch.Tensor:
        return torch.empty(shape, dtype=torch.uint8)

    def release(self, images: torch.Tensor) -> None:
        pass


class BatchAssembler:
    """One reader's batch under construction: N x H x W x 3 uint8 slots, labels, keys and counters.

    ``slot()`` is where the next image goes (augment writes into it); ``commit`` keeps it. A sample
    that fails after taking a slot is simply not committed, and the next one reuses the slot.

    ``buffers``: where the image buffer is allocated (shared memory for a DataLoader worker).
    ``image_size`` None: samples read without decoding; ``add`` takes each one's byte length, and
    no image buffer is ever allocated.
    """

    def __init__(
        self,
        batch_size: int,
        image_size: int | None,
        *,
        buffers: BatchBuffers | None = None,
        stats: StageStats | None = None,
    ) -> None:
        self.batch_size, self.image_size = batch_size, image_size
        self.buffers = buffers or PlainBuffers()
        self._images: torch.Tensor | None = None
        self._slots: np.ndarray | None = None  # the same buffer, as numpy
        self.labels: list[int] = []
        self.keys: list[str] = []
        self.sizes: list[int] = []
        self.stats = stats or StageStats()

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def full(self) -> bool:
        return len(self.keys) == self.batch_size

    def slot(self) -> np.ndarray:
        return self._numpy()[len(self.keys)]

    def slot_view(self, i: int) -> np.ndarray:
        """The image of the ``i``-th sample kept (a view of the buffer)."""
        return self._numpy()[i]

    def _numpy(self) -> np.ndarray:
        slots = self._slots
        if slots is None:
            if self._images is None:
                size = self.image_size
                if size is None:  # torch.empty would refuse the shape with a TypeError too
                    raise TypeError("a batch read without decoding has no image slots")
                with Stopwatch(self.stats, "collate"):
                    shape = (self.batch_size, size, size, 3)
                    self._images = self.buffers.allocate(shape, self.stats)
            slots = self._slots = self._images.numpy()  # numpy indexing: ~0.2 µs a slot, torch's ~30
        return slots

    def __getstate__(self) -> dict:
        # sent to another process (a mapper process's batch): the numpy view would go as a copy of
        # its own; it is made again from the buffer there
        return {**self.__dict__, "_slots": None}

    def commit(self, label: int, key: str) -> None:
        self.labels.append(label)
        self.keys.append(key)

    def add(self, image: np.ndarray | int, label: int, key: str) -> None:
        """An image made elsewhere (a mapper thread): copied into its slot; in a batch read without
        decoding, the sample's byte length."""
        if self.image_size is None:
            self.sizes.append(int(image))
            self.commit(label, key)
            return
        slot = self.slot()
        with Stopwatch(self.stats, "collate"):
            slot[...] = image
        self.commit(label, key)

    def take(self, *, drop_partial: bool = False) -> Batch | None:
        """The batch (this assembler is used up). A partial batch under ``drop_partial`` loses its
        images but keeps its counters (errors and bytes must still reach the consumer); None when
        there is nothing at all."""
        n, stats, images = len(self.keys), self.stats, self._images
        if n and (n == self.batch_size or not drop_partial):
            with Stopwatch(stats, "collate"):
                labels = torch.tensor(self.labels, dtype=torch.int64)
            if self.image_size is None:
                return Batch(
                    None, labels, self.keys, sizes=torch.tensor(self.sizes, dtype=torch.int64), stats=stats
                )
            assert images is not None
            return Batch(images[:n].permute(0, 3, 1, 2), labels, self.keys, stats=stats)
        if images is not None:
            self.buffers.release(images)
        stats.samples -= n  # a dropped tail was decoded but is not delivered
        if stats.errors or stats.bytes_read or stats.counters:
            return Batch(None, None, stats=stats)
        return None
