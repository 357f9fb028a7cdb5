"""iobench's own DCP storage reader: reads what :mod:`writer` wrote, each item's bytes into aligned
memory with ``depth`` requests in flight, checks each request's crc32 and the part's length, then
hands DCP's planner the tensor to copy into its destination (resharding is DCP's).

A part shorter than its metadata says, or bytes that fail their checksum, stop the restore with the
file, the shard (its name and offsets) and the byte range: a checkpoint is never silently half loaded.
"""

from __future__ import annotations

import io
import os
import pickle
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Queue
from typing import Any

import crc32c
import torch
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, TensorStorageMetadata
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, ReadItem
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from .aligned import aligned_bytes, buffer_of, byte_view, round_up
from .errors import CheckpointCorrupt
from .layout import PartSlice
from .store import Store
from .writer import DEFAULT_IO, IoOptions, StoreBound


class DcpStoreReader(StoreBound, StorageReader):
    """A DCP StorageReader over a :class:`~iobench.checkpoint.store.Store`."""

    def __init__(self, store: Store, options: IoOptions = DEFAULT_IO) -> None:
        super().__init__(store, options)
        self.storage_data: dict[MetadataIndex, PartSlice] = {}
        self.metadata: Metadata | None = None
        self._buffers: Queue[torch.Tensor] = Queue()
        for _ in range(options.depth + 1):
            self._buffers.put(aligned_bytes(options.chunk_bytes))

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        raw = self.store.read_metadata(self.checkpoint_id)
        try:
            metadata = pickle.loads(raw)
        except Exception as exc:
            where = self.store.locate(self.checkpoint_id, ".metadata")
            raise CheckpointCorrupt(
                f"{where} is not a checkpoint's metadata ({exc}): restore an earlier checkpoint"
            ) from None
        if not isinstance(metadata, Metadata):
            raise CheckpointCorrupt(
                f"{self.store.locate(self.checkpoint_id, '.metadata')} holds no DCP metadata"
            )
        return metadata

    def set_up_storage_reader(
        self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any
    ) -> None:
        self.metadata = metadata
        self.storage_data = metadata.storage_data or {}

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        self.totals.started = time.perf_counter()
        by_part: dict[str, list[ReadItem]] = {}
        for item in plan.items:
            by_part.setdefault(self._slice(item).part, []).append(item)
        with ThreadPoolExecutor(self.options.depth, thread_name_prefix="ckpt-read") as pool:
            for name, items in sorted(by_part.items()):
                part = self.store.open_reader(self.checkpoint_id, name)
                try:
                    self._read_part(pool, part, name, items, planner)
                finally:
                    part.close()
        self.totals.ended = time.perf_counter()
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def _slice(self, item: ReadItem) -> PartSlice:
        slice_ = self.storage_data.get(item.storage_index)
        if not isinstance(slice_, PartSlice):
            raise CheckpointCorrupt(
                f"{self.store.locate(self.checkpoint_id, '.metadata')}: no location for shard "
                f"{_shard(item.storage_index)}; it was not written by iobench's checkpoint writer"
            )
        return slice_

    def _read_part(self, pool, part, name: str, items: list[ReadItem], planner: LoadPlanner) -> None:
        # in order of offset; an item whose destination takes the stored tensor whole is read straight
        # into it through reused aligned buffers, any other (a resharded load, bytes) whole first
        jobs = []
        for item in sorted(items, key=lambda it: self._slice(it).offset):
            slice_ = self._slice(item)
            self._check_length(part, name, item, slice_)
            target = None if item.type == LoadItemType.BYTE_IO else planner.resolve_tensor(item).detach()
            dest = self._whole(item, target, slice_)
            if dest is None:
                futures = [pool.submit(self._read_item, part, name, item, slice_)]
            else:
                futures = [
                    pool.submit(self._read_chunk, part, name, item, slice_, k, dest)
                    for k in range(len(slice_.chunks()))
                ]
            jobs.append((item, target, dest, futures))
        for item, target, dest, futures in jobs:
            done = [f.result() for f in futures]  # every request of the item, its errors raised here
            raw = done[0]
            if target is None:
                planner.load_bytes(item, io.BytesIO(bytes(buffer_of(raw))))
                continue
            if dest is None:
                target.copy_(self._as_tensor(item, raw))
            planner.commit_tensor(item, target)

    def _whole(self, item: ReadItem, target: torch.Tensor | None, slice_: PartSlice) -> torch.Tensor | None:
        """``target``'s bytes when it takes the stored tensor whole (same dtype, every element), else None."""
        meta = self.metadata.state_dict_metadata.get(item.storage_index.fqn) if self.metadata else None
        if target is None or not isinstance(meta, TensorStorageMetadata) or not target.is_contiguous():
            return None
        if target.dtype != meta.properties.dtype or target.numel() * target.element_size() != slice_.length:
            return None
        if any(item.storage_offsets) or tuple(item.lengths) != tuple(_stored_sizes(meta, item.storage_index)):
            return None
        return byte_view(target)

    def _check_length(self, part, name: str, item: ReadItem, slice_: PartSlice) -> None:
        if slice_.offset + slice_.length > part.size:
            raise CheckpointCorrupt(
                f"{self.store.locate(self.checkpoint_id, name)} is truncated: shard {_shard(item.storage_index)} "
                f"needs bytes {slice_.offset}-{slice_.offset + slice_.length} and the file has {part.size}; "
                "restore an earlier checkpoint"
            )

    def _read_chunk(
        self, part, name: str, item: ReadItem, slice_: PartSlice, k: int, dest: torch.Tensor
    ) -> None:
        at, n = slice_.chunks()[k]
        if n == 0:
            return
        if self.store.alignment == 1:  # no alignment asked: straight into the destination
            self._request(part, name, item, slice_, k, buffer_of(dest[at : at + n]))
            return
        buf = self._buffers.get()
        try:
            view = self._request(
                part, name, item, slice_, k, buffer_of(buf[: round_up(n, self.store.alignment)])
            )
            dest[at : at + n].copy_(buf[:n])
            del view
        finally:
            self._buffers.put(buf)

    def _read_item(self, part, name: str, item: ReadItem, slice_: PartSlice) -> torch.Tensor:
        raw = aligned_bytes(slice_.length)
        for k, (at, n) in enumerate(slice_.chunks()):
            if n:
                self._request(
                    part, name, item, slice_, k, buffer_of(raw[at : at + round_up(n, self.store.alignment)])
                )
        return raw[: slice_.length]

    def _request(
        self, part, name: str, item: ReadItem, slice_: PartSlice, k: int, view: memoryview
    ) -> memoryview:
        """Request ``k`` of the item read into ``view``, its length and checksum checked."""
        at, n = slice_.chunks()[k]
        start = slice_.offset + at
        with self.totals.log.request(len(view)):
            got = _read_all(part, view, start)
        where = f"{self.store.locate(self.checkpoint_id, name)}"
        if got < n:
            raise CheckpointCorrupt(
                f"{where} is truncated: shard {_shard(item.storage_index)} ends at byte {start + got} of "
                f"{slice_.offset + slice_.length}; restore an earlier checkpoint"
            )
        if slice_.crcs and crc32c.crc32c(view[:n]) != slice_.crcs[k]:
            raise CheckpointCorrupt(
                f"{where} is corrupt: shard {_shard(item.storage_index)} fails its checksum in bytes "
                f"{start}-{start + n}; restore an earlier checkpoint"
            )
        return view

    def _as_tensor(self, item: ReadItem, raw: torch.Tensor) -> torch.Tensor:
        meta = self.metadata.state_dict_metadata[item.storage_index.fqn] if self.metadata else None
        if not isinstance(meta, TensorStorageMetadata):
            raise CheckpointCorrupt(
                f"shard {_shard(item.storage_index)}: the metadata holds no tensor for it"
            )
        sizes = _stored_sizes(meta, item.storage_index)
        tensor = raw.view(meta.properties.dtype).reshape(sizes)
        for dim, (start, length) in enumerate(zip(item.storage_offsets, item.lengths, strict=True)):
            tensor = tensor.narrow(dim, start, length)
        return tensor

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike) -> bool:
        return True


def _stored_sizes(meta: TensorStorageMetadata, index: MetadataIndex) -> torch.Size:
    if index.offset is None:
        return meta.size
    for chunk in meta.chunks:
        if tuple(chunk.offsets) == tuple(index.offset):
            return chunk.sizes
    raise CheckpointCorrupt(f"shard {_shard(index)}: the metadata lists no stored chunk at these offsets")


def _shard(index: MetadataIndex) -> str:
    return index.fqn + (f" at offsets {tuple(index.offset)}" if index.offset is not None else "")


def _read_all(part, view: memoryview, offset: int) -> int:
    got = 0
    while got < len(view):
        n = part.preadinto(view[got:], offset + got)
        if n <= 0:
            break
        got += n
    return got
