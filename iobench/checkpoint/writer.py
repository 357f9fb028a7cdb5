"""iobench's own DCP storage writer: DCP's planner decides what this rank saves; the writer lays
it out in its parts (layout.py) and writes it with ``depth`` requests in flight, each of up to
``chunk_bytes``, straight from the tensors' memory where the store allows, else through reused
aligned buffers (O_DIRECT); every part is made durable before the rank reports its results, and the
coordinator commits the checkpoint (metadata last, store.py) only after every rank has.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import threading
import time
from concurrent.futures import Future as CFuture
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from queue import Queue
from typing import Any

import crc32c
import torch
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import SavePlan, SavePlanner, WriteItem, WriteItemType
from torch.distributed.checkpoint.storage import StorageWriter, WriteResult
from torch.futures import Future

from .aligned import ALIGN, aligned_bytes, buffer_of, byte_view, is_aligned, round_up
from .errors import TierFull, is_no_space
from .layout import PartSlice, RankPrefix, assign, offsets
from .store import IoLog, Store


@dataclass(frozen=True)
class IoOptions:
    """How a rank's writer or reader drives the store."""

    depth: int = 8  # requests in flight
    chunk_bytes: int = 8 << 20  # the most one request carries
    checksum: bool = True  # CRC32C of every request's bytes, checked on restore
    parts_per_rank: int = 1  # files (or striped objects) each rank writes


DEFAULT_IO = IoOptions()


@dataclass
class WriteTotals:
    """One rank's write: its bytes, its requests, and the seconds of its final sync."""

    log: IoLog
    sync_s: float = 0.0
    started: float = 0.0
    ended: float = 0.0


def _item_bytes(item: WriteItem) -> int:
    """The bytes of this rank's chunk of the item's tensor (of a sharded tensor its shard, not the
    whole: ``tensor_data.size`` is the global shape)."""
    if item.tensor_data is None:
        return 0
    size = item.tensor_data.properties.dtype.itemsize
    for s in item.tensor_data.chunk.sizes:
        size *= s
    return size


class StoreBound:
    """What iobench's DCP writer and reader share, before DCP's own base class in their order: the
    :class:`~iobench.checkpoint.store.Store` and how they drive it, the checkpoint DCP names, and the
    totals of the save or load under way (new at each ``reset``)."""

    def __init__(self, store: Store, options: IoOptions = DEFAULT_IO) -> None:
        super().__init__()
        self.store, self.options = store, options
        self.checkpoint_id = ""
        self.totals = WriteTotals(IoLog())

    def reset(self, checkpoint_id: str | os.PathLike | None = None) -> None:
        if checkpoint_id is not None:
            self.checkpoint_id = os.fspath(checkpoint_id)
        self.totals = WriteTotals(IoLog())


class DcpStoreWriter(StoreBound, StorageWriter):
    """A DCP StorageWriter over a :class:`~iobench.checkpoint.store.Store`."""

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        return [replace(p, storage_data=RankPrefix(f"__{i}_")) for i, p in enumerate(plans)]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        prefix = plan.storage_data.prefix if isinstance(plan.storage_data, RankPrefix) else "__0_"
        done: Future[list[WriteResult]] = Future()
        done.set_result(_RankWrite(self, plan, planner, prefix).run())
        return done

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        metadata.storage_data = {r.index: r.storage_data for rank in results for r in rank}
        self.store.commit(self.checkpoint_id, pickle.dumps(metadata))

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike) -> bool:
        return True


class _RankWrite:
    """One rank's write_data: items laid out, requests in flight, parts made durable."""

    def __init__(self, writer: DcpStoreWriter, plan: SavePlan, planner: SavePlanner, prefix: str) -> None:
        self.writer, self.planner, self.opts = writer, planner, writer.options
        self.store, self.cid = writer.store, writer.checkpoint_id
        self.items = sorted(plan.items, key=lambda i: i.type != WriteItemType.BYTE_IO)  # bytes first
        self.blobs = {
            i: self._blob(it) for i, it in enumerate(self.items) if it.type == WriteItemType.BYTE_IO
        }
        self.sizes = [
            len(self.blobs[i]) if i in self.blobs else _item_bytes(it) for i, it in enumerate(self.items)
        ]
        parts = max(1, min(self.opts.parts_per_rank, len(self.items)))
        self.part_of = assign(self.sizes, parts)
        # a store of one object per request starts every item on a request's boundary
        self.offsets, ends = offsets(
            self.sizes, self.part_of, parts, getattr(self.store, "item_alignment", ALIGN)
        )
        self.names = [f"{prefix}{p}.distcp" for p in range(parts)]
        self.total = sum(ends)
        self.ends = ends
        self.crcs: dict[tuple[int, int], int] = {}
        self.written = 0
        self.failure: BaseException | None = None
        self.lock = threading.Lock()
        direct = self.store.alignment > 1
        self.bounce: Queue[torch.Tensor] | None = Queue() if direct else None
        if self.bounce is not None:
            for _ in range(self.opts.depth + 1):
                self.bounce.put(aligned_bytes(self.opts.chunk_bytes))

    def _blob(self, item: WriteItem) -> torch.Tensor:
        data = self.planner.resolve_data(item)
        raw = data.getvalue() if isinstance(data, io.BytesIO) else bytes(data)
        return (
            torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        )

    def run(self) -> list[WriteResult]:
        totals = self.writer.totals
        totals.started = time.perf_counter()
        handles = []
        try:
            for name, end in zip(self.names, self.ends, strict=True):
                handles.append(self.store.open_part(self.cid, name))
                _reserve(handles[-1], end)
            self._write_items(handles)
            t0 = time.perf_counter()
            for h in handles:
                h.close()
            handles = []
            totals.sync_s = time.perf_counter() - t0
        except BaseException as exc:
            for h in handles:
                with contextlib.suppress(OSError):
                    h.close()
            self.store.abort(self.cid)  # nothing of this save may stay: it can never be committed
            if is_no_space(exc):
                raise TierFull(
                    self.store.where, self.written, self.total, self.store.locate(self.cid, "")
                ) from exc
            raise
        totals.ended = time.perf_counter()
        return [self._result(i, item) for i, item in enumerate(self.items)]

    def _write_items(self, handles: list) -> None:
        in_flight = threading.BoundedSemaphore(self.opts.depth * 2)
        with ThreadPoolExecutor(self.opts.depth, thread_name_prefix="ckpt-write") as pool:
            futures: list[CFuture] = []
            for i, item in enumerate(self.items):
                if self.failure is not None:
                    break
                data = self.blobs.get(i)
                if data is None:
                    data = byte_view(_on_cpu(self.planner.resolve_data(item)))
                slice_ = PartSlice(
                    self.names[self.part_of[i]], self.offsets[i], self.sizes[i], self.opts.chunk_bytes
                )
                for k, (at, n) in enumerate(slice_.chunks()):
                    if n == 0 or self.failure is not None:
                        continue
                    in_flight.acquire()
                    f = pool.submit(
                        self._request, handles[self.part_of[i]], data[at : at + n], slice_.offset + at, (i, k)
                    )
                    f.add_done_callback(lambda _f: in_flight.release())
                    futures.append(f)
            for f in futures:
                f.result()
        if self.failure is not None:
            raise self.failure

    def _request(self, handle, src: torch.Tensor, offset: int, key: tuple[int, int]) -> None:
        if self.failure is not None:
            return
        n = src.numel()
        buf = None
        try:
            if self.bounce is not None and not (is_aligned(src) and n % self.store.alignment == 0):
                buf = self.bounce.get()
                padded = round_up(n, self.store.alignment)
                buf[:n].copy_(src)
                buf[n:padded].zero_()
                view = buffer_of(buf[:padded])
            else:
                view = buffer_of(src)
            if self.opts.checksum:
                self.crcs[key] = crc32c.crc32c(view[:n])
            with self.writer.totals.log.request(len(view)):
                _write_all(handle, view, offset)
            with self.lock:
                self.written += n
        except BaseException as exc:
            self.failure = self.failure or exc
            raise
        finally:
            if buf is not None:
                assert self.bounce is not None  # buf was taken from it
                self.bounce.put(buf)

    def _result(self, i: int, item: WriteItem) -> WriteResult:
        slice_ = PartSlice(self.names[self.part_of[i]], self.offsets[i], self.sizes[i], self.opts.chunk_bytes)
        crcs = (
            tuple(self.crcs.get((i, k), 0) for k in range(len(slice_.chunks()))) if self.opts.checksum else ()
        )
        return WriteResult(
            index=item.index, size_in_bytes=self.sizes[i], storage_data=replace(slice_, crcs=crcs)
        )


def _on_cpu(data: Any) -> torch.Tensor:
    """A resolved item's tensor in host memory (a device tensor copied here: the staging a sync save
    pays inside the write)."""
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"a tensor item resolved to {type(data).__name__}")
    return data if data.device.type == "cpu" else data.to("cpu")


def _write_all(handle, view: memoryview, offset: int) -> None:
    while len(view):
        n = handle.pwrite(view, offset)
        if n <= 0:
            raise OSError(28, "No space left on device")  # a write that makes no progress is a full tier
        view, offset = view[n:], offset + n


def _reserve(handle, nbytes: int) -> None:
    """Allocate the part's blocks before writing (file stores): requests within the file's size
    overlap on the device instead of queueing on the file's lock, and a tier without the space says
    so before the first byte. Stores and file systems that cannot preallocate skip it."""
    fd = getattr(handle, "fd", None)
    if fd is None or nbytes <= 0:
        return
    try:
        os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        if is_no_space(exc):
            raise
        return  # EOPNOTSUPP and the like: write without it
