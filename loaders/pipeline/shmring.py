"""Batch buffers that DataLoader workers reuse instead of allocating shared memory for every batch.

torch sends a worker's batch to the main process as a fresh shared-memory segment each time: the
worker takes a page fault (and the kernel zeroes a page) for every 4 KiB it writes, and passes a
file descriptor over a socket per tensor. For 64 crops of 224 x 224 that is ~2,400 faults per
batch, about 4 % of a worker's CPU here (docs/benchmarks.md). A ring holds a few slots per worker
in one shared mapping, made by the main process before the workers start; a worker writes a batch
into a free slot of its own and sends only the slot's number.

The slot comes back when the consumer is done with it, which is the moment the last tensor viewing
it dies: the main process wraps a slot with ``torch.from_numpy`` of an array the tensor's storage
keeps alive, and a ``weakref.finalize`` on that array marks the slot free. Views, ``.numpy()``
and the pin-memory copy all keep or release the storage the way any tensor would, so a consumer
that keeps batches (or hands them to another process, which moves them to new shared memory)
never sees a slot overwritten. A worker that finds none of its slots free falls back to torch's
own shared memory; the ``ring_fallback_batches`` counter says how often.

Any start method. The slots and their flags live in one anonymous shared-memory file (memfd) mapped
shared: a forked worker inherits the mapping, and a worker started by spawn or forkserver receives
the ring pickled with the dataset, its descriptor passed by multiprocessing (as torch passes a
tensor's). Not /dev/shm: containers give that mount 64 MiB unless told otherwise (Docker,
Kubernetes), and the ring of 2 workers x 6 slots of 64 crops of 224 x 224 is 116 MB, so a ring
there stopped the loader at its start; a memfd is the same memory (charged to the container's
memory limit) without the mount's cap. Nothing is named anywhere, so nothing is left after a
crash. The ring lives as long as the loader's workers: one per loader with persistent workers, one
per epoch otherwise; a consumer still holding a batch keeps that mapping alive on its own.

A batch in transit that is never turned into a tensor (torch drops what workers had prefetched
when an iteration is reset) frees its slot when it is garbage collected (``Batch`` guards it).
"""

from __future__ import annotations

import itertools
import mmap
import os
import weakref
from multiprocessing.reduction import DupFd

import numpy as np
import torch

from loaders.observe.stages import StageStats

FREE, TAKEN = 0, 1
_ids = itertools.count(1)
# the rings of this process by id: a batch in transit names its ring by number, and the pin-memory
# thread, which gets the batch before the loader does, finds the ring here
_rings: weakref.WeakValueDictionary[int, ShmRing] = weakref.WeakValueDictionary()


def release_slot(ring_id: int, slot: int) -> None:
    ring = _rings.get(ring_id)
    if ring is not None:  # a ring already gone has no worker left to hand the slot to
        ring.release(slot)


def ring_by_id(ring_id: int) -> ShmRing:
    ring = _rings.get(ring_id)
    if ring is None:
        raise RuntimeError(f"batch buffer ring {ring_id} is gone: a batch outlived the epoch that made it")
    return ring


class ShmRing:
    """``workers`` x ``slots_per_worker`` slots of ``slot_bytes`` each, shared with the workers
    whatever their start method (fork, forkserver, spawn)."""

    def __init__(self, workers: int, slots_per_worker: int, slot_bytes: int) -> None:
        self.workers, self.slots_per_worker, self.slot_bytes = workers, slots_per_worker, slot_bytes
        # a new memfd reads as zeros, so every flag starts FREE; clearing it here would also fault
        # in every page of the slots in this process, which never writes them (~36 ms and 28,000
        # page faults for a 115 MB ring, before the workers could start)
        self._fd = os.memfd_create("loaders-batch-ring")
        weakref.finalize(self, os.close, self._fd)
        os.ftruncate(self._fd, self._size())
        self.id = next(_ids)
        self._map(self._fd)
        _rings[self.id] = self

    def _size(self) -> int:
        return self.workers * self.slots_per_worker * (self.slot_bytes + 1)

    def _map(self, fd: int) -> None:
        n = self.workers * self.slots_per_worker
        whole = np.frombuffer(mmap.mmap(fd, self._size()), dtype=np.uint8)  # shared, read-write
        self._bytes, self.state = whole[: n * self.slot_bytes], whole[n * self.slot_bytes :]

    def __getstate__(self) -> dict:
        # pickled for a worker that is spawned (or forked by a forkserver): the memfd travels as a
        # descriptor, duplicated into the worker by multiprocessing; the worker maps it on arrival
        state = {k: getattr(self, k) for k in ("workers", "slots_per_worker", "slot_bytes", "id")}
        return {**state, "fd": DupFd(self._fd)}

    def __setstate__(self, state: dict) -> None:
        fd = state.pop("fd").detach()
        self.__dict__.update(state)
        self._map(fd)
        os.close(fd)  # the mapping holds the memory
        _rings.setdefault(self.id, self)

    def acquire(self, worker: int) -> int | None:
        """A free slot of ``worker``'s own (only that worker takes them: no race), or None."""
        first = worker * self.slots_per_worker
        for slot in range(first, first + self.slots_per_worker):
            if self.state[slot] == FREE:
                self.state[slot] = TAKEN
                return slot
        return None

    def release(self, slot: int) -> None:
        self.state[slot] = FREE

    def array(self, slot: int, nbytes: int | None = None) -> np.ndarray:
        """The slot's bytes (the first ``nbytes`` of them) as a flat uint8 array."""
        count = self.slot_bytes if nbytes is None else nbytes
        start = slot * self.slot_bytes
        return self._bytes[start : start + count]

    def tensor(self, slot: int, shape: tuple[int, ...]) -> torch.Tensor:
        """Main process: the slot as a uint8 tensor; the slot is freed when its storage dies."""
        arr = self.array(slot, int(np.prod(shape))).reshape(shape)
        # by id, not a bound method: a batch kept for good must not keep the ring object (and its
        # registry entry) alive; it keeps only the mapping its array views
        weakref.finalize(arr, release_slot, self.id, slot)
        return torch.from_numpy(arr)

    def free_slots(self) -> int:
        return int(np.count_nonzero(self.state == FREE))

    def slot_of(self, images: torch.Tensor) -> int | None:
        """The slot whose memory ``images`` (a view from its first byte) is, or None."""
        offset = images.data_ptr() - self._bytes.ctypes.data
        if 0 <= offset < self._bytes.size and offset % self.slot_bytes == 0:
            return offset // self.slot_bytes
        return None


class SharedBuffers:
    """Batch buffers a DataLoader worker sends to the main process: a slot of ``ring`` of worker
    ``owner``'s while one is free, else a new segment of torch's shared memory (counted as
    ``ring_fallback_batches``). ``ring`` None: torch's shared memory always."""

    def __init__(self, ring: ShmRing | None, owner: int) -> None:
        self.ring, self.owner = ring, owner

    def allocate(self, shape: tuple[int, ...], stats: StageStats) -> torch.Tensor:
        if self.ring is not None:
            slot = self.ring.acquire(self.owner)
            if slot is not None:
                return torch.from_numpy(self.ring.array(slot).reshape(shape))
            stats.counters.ring_fallback_batches += 1
        storage = torch.UntypedStorage._new_shared(int(np.prod(shape)))
        return torch.empty(0, dtype=torch.uint8).set_(storage).view(shape)

    def release(self, images: torch.Tensor) -> None:
        ring = self.ring
        slot = None if ring is None else ring.slot_of(images)
        if ring is not None and slot is not None:
            ring.release(slot)
