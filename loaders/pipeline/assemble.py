"""Collating without copies: each sample's crop is written straight into its slot of the batch.

A stack of 64 crops of 224 x 224 costs a 9.6 MB copy, and a DataLoader worker then copies the
stacked batch once more into shared memory to send it: together about 7 % of the CPU time a sample
costs here (measured, docs/benchmarks.md). The assembler allocates the batch buffer first (in
shared memory inside a DataLoader worker, as torch's own default_collate does) and hands augment
one slot at a time, so a full batch is already collated and already shareable.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from loaders.observe.stages import StageStats, Stopwatch
from loaders.pipeline.shmring import ShmRing, release_slot, ring_by_id

END, STALE = "end", "stale"


@dataclass
class Batch:
    """What every loader backend yields: images N x 3 x H x W uint8 (channels_last), labels int64;
    or, read without decoding (``decode=False``), no images but each sample's byte length (``sizes``,
    int64), so nothing passes for an image that was never decoded."""

    images: torch.Tensor | None
    labels: torch.Tensor | None
    keys: list[str] = field(default_factory=list)
    stats: StageStats = field(default_factory=StageStats)
    # resume bookkeeping: how many samples of the reader's shuffled stream this batch accounts for
    # (delivered, failed or dropped), and which reader (DataLoader worker) produced it
    consumed: int = 0
    reader: int = 0
    # in transit from a DataLoader worker: the images wait in slot ``slot`` of ring ``ring_id``
    # (N x H x W x 3) and the labels travel as a list, so no tensor crosses the process boundary
    in_ring: tuple[int, int, tuple[int, ...], list[int]] | None = None
    # which epoch of which stream (generation) of its reader this batch belongs to: a DataLoader
    # worker streams epoch after epoch, and the loader sorts what arrives by these tags
    epoch: int = 0
    generation: int = 0
    # not a batch but a signal from a reader: END (its share of ``epoch`` is complete) or STALE
    # (its stream was abandoned, the loader is starting another)
    marker: str | None = None
    sizes: torch.Tensor | None = None
    # when its reader began and finished making it (time.perf_counter, one clock for every process
    # on the host): the production times a model of the loader's queue replays (iobench's scale model)
    made: tuple[float, float] | None = None
    # each of its samples' reads, where they are made ahead of the pipeline (one object per sample,
    # reads in flight): when it was asked for and when its bytes were in (time.perf_counter); None:
    # read as it went. The first reads of a batch are asked for while the batch before it is
    # finished and run on while the reader waits to be asked for it: iobench's scale model replays that
    reads: tuple[tuple[float, float], ...] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def delivers(self) -> bool:
        """A batch the consumer receives (a training step), as opposed to counters or a marker."""
        return self.images is not None or self.in_ring is not None or self.sizes is not None

    @property
    def data(self) -> torch.Tensor | None:
        """What a training step consumes: the images, or the byte lengths of a batch not decoded."""
        return self.images if self.images is not None else self.sizes

    @classmethod
    def empty(cls, image_size: int | None, **tags) -> Batch:
        """A batch of no samples: what a reader yields when skipped samples left it short of the
        batches its plan promised, so that every rank still takes the same number of steps.
        ``image_size`` None: a batch of byte lengths (read without decoding)."""
        labels = torch.empty(0, dtype=torch.int64)
        if image_size is None:
            return cls(None, labels, sizes=torch.empty(0, dtype=torch.int64), **tags)
        images = torch.empty((0, image_size, image_size, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
        return cls(images, labels, **tags)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_guard", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.in_ring is not None:
            # arrived from a worker: until it becomes a tensor, this object holds the ring slot, so
            # a batch dropped in transit (torch discards prefetched batches on a reset) frees it
            self.__dict__["_guard"] = weakref.finalize(self, release_slot, self.in_ring[0], self.in_ring[1])

    def received(self) -> Batch:
        """In the main process: the batch with its images and labels as tensors again."""
        if self.in_ring is None:
            return self
        guard = self.__dict__.pop("_guard", None)
        if guard is not None:
            guard.detach()  # the tensor's own finalizer frees the slot from here on
        ring_id, slot, shape, labels = self.in_ring
        images = ring_by_id(ring_id).tensor(slot, shape).permute(0, 3, 1, 2)
        return replace(self, images=images, labels=torch.tensor(labels, dtype=torch.int64), in_ring=None)

    def pin_memory(self) -> Batch:
        """Called by DataLoader(pin_memory=True) and torchdata's PinMemory for custom batch types."""
        batch = self.received()
        if batch.images is None:
            return batch
        return replace(batch, images=batch.images.pin_memory(), labels=batch.labels.pin_memory())


class BatchAssembler:
    """One reader's batch under construction: N x H x W x 3 uint8 slots, labels, keys and counters.

    ``slot()`` is where the next image goes (augment writes into it); ``commit`` keeps it. A sample
    that fails after taking a slot is simply not committed, and the next one reuses the slot.

    ``shared``: the batch goes to another process, so its buffer is shared memory: a slot of
    ``ring`` (this worker's number ``ring_owner``) when one is free, else a new torch segment.

    ``image_size`` None: samples read without decoding; ``add`` takes each one's byte length, and
    no image buffer is ever allocated.
    """

    def __init__(
        self,
        batch_size: int,
        image_size: int | None,
        *,
        shared: bool = False,
        stats: StageStats | None = None,
        ring: ShmRing | None = None,
        ring_owner: int = 0,
    ) -> None:
        self.batch_size, self.image_size, self.shared = batch_size, image_size, shared
        self.ring, self.ring_owner = ring, ring_owner
        self._ring_slot: int | None = None
        self._images: torch.Tensor | None = None
        self._slots: np.ndarray | None = None  # the same buffer, as numpy
        self.labels: list[int] = []
        self.keys: list[str] = []
        self.sizes: list[int] = []
        self.stats = stats or StageStats()
        self.consumed = 0  # samples of the reader's stream this batch accounts for (resume)

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def full(self) -> bool:
        return len(self.keys) == self.batch_size

    def slot(self) -> np.ndarray:
        if self.image_size is None:
            raise TypeError("a batch read without decoding has no image slots")
        if self._images is None:
            with Stopwatch(self.stats, "collate"):
                self._images = self._allocate()
                self._slots = self._images.numpy()  # numpy indexing: ~0.2 µs a slot, torch's ~30
        return self._slots[len(self.keys)]

    def commit(self, label: int, key: str) -> None:
        self.labels.append(label)
        self.keys.append(key)

    def add(self, image: np.ndarray | int, label: int, key: str) -> None:
        """An image made elsewhere (a mapper thread): copied into its slot; in a batch read without
        decoding, the sample's byte length."""
        if self.image_size is None:
            self.sizes.append(int(image))  # type: ignore[arg-type]
            self.commit(label, key)
            return
        slot = self.slot()
        with Stopwatch(self.stats, "collate"):
            slot[...] = image
        self.commit(label, key)

    def take(self, *, drop_partial: bool = False) -> Batch | None:
        """The batch so far, and a fresh assembler state. A partial batch under ``drop_partial`` loses
        its images but keeps its counters (errors and bytes must still reach the consumer)."""
        n, stats, consumed, keys, labels, images, ring_slot, sizes = (
            len(self.keys), self.stats, self.consumed, self.keys, self.labels, self._images, self._ring_slot,
            self.sizes,
        )  # fmt: skip
        self._images, self.labels, self.keys, self.stats, self.consumed = None, [], [], StageStats(), 0
        self.sizes = []
        self._slots = None
        self._ring_slot = None
        delivered = bool(n and (n == self.batch_size or not drop_partial))
        if ring_slot is not None:
            assert self.ring is not None
            if delivered:
                shape = (n, self.image_size, self.image_size, 3)
                return Batch(
                    None, None, keys, stats, consumed, in_ring=(self.ring.id, ring_slot, shape, labels)
                )
            self.ring.release(ring_slot)
        if delivered:
            with Stopwatch(stats, "collate"):
                label_tensor = torch.tensor(labels, dtype=torch.int64)
            if self.image_size is None:
                return Batch(
                    None, label_tensor, keys, stats, consumed, sizes=torch.tensor(sizes, dtype=torch.int64)
                )
            assert images is not None
            return Batch(images[:n].permute(0, 3, 1, 2), label_tensor, keys, stats, consumed)
        stats.samples -= n  # a dropped tail was decoded but is not delivered
        if stats.errors or stats.bytes_read or stats.counters or consumed:
            return Batch(images=None, labels=None, keys=[], stats=stats, consumed=consumed)
        return None

    def _allocate(self) -> torch.Tensor:
        shape = (self.batch_size, self.image_size, self.image_size, 3)
        if not self.shared:
            return torch.empty(shape, dtype=torch.uint8)
        if self.ring is not None:
            self._ring_slot = self.ring.acquire(self.ring_owner)
            if self._ring_slot is not None:
                return torch.from_numpy(self.ring.array(self._ring_slot).reshape(shape))
            self.stats.counters["ring_fallback_batches"] += 1
        storage = torch.UntypedStorage._new_shared(int(np.prod(shape)))
        return torch.empty(0, dtype=torch.uint8).set_(storage).view(shape)
