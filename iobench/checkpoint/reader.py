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
from typing import Any

import crc32c
import torch
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, TensorStorageMetadata
from torch.distributed.checkpoint.planner import LoadItemType, LoadPlan, LoadPlanner, ReadItem
from torch.distributed.checkpoint.storage import StorageReader
from torch.futures import Future

from .aligned import aligned_bytes, buffer_of, round_up
from .errors import CheckpointCorrupt
from .layout import PartSlice
from .store import IoLog, Store
from .writer import IoOptions, WriteTotals


class ShardReader(StorageReader):
    """A DCP StorageReader over a :class:`~iobench.checkpoint.store.Store`."""

    def __init__(self, store: Store, options: IoOptions = IoOptions()) -> None:
        super().__init__()
        self.store, self.options = store, options
        self.checkpoint_id = ""
        self.totals = WriteTotals(IoLog())
        self.storage_data: dict[MetadataIndex, PartSlice] = {}
        self.metadata: Metadata | None = None

    def reset(self, checkpoint_id: str | os.PathLike | None = None) -> None:
        if checkpoint_id is not None:
            self.checkpoint_id = os.fspath(checkpoint_id)
        self.totals = WriteTotals(IoLog())

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        raw = self.store.read_metadata(self.checkpoint_id)
        try:
            metadata = pickle.loads(raw)
        except Exception as exc:
            where = self.store.locate(self.checkpoint_id, ".metadata")
            raise CheckpointCorrupt(f"{where} is not a checkpoint's metadata ({exc}): restore an earlier checkpoint") from None
        if not isinstance(metadata, Metadata):
            raise CheckpointCorrupt(f"{self.store.locate(self.checkpoint_id, '.metadata')} holds no DCP metadata")
        return metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
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
        # an item read is shared by every ReadItem of it (a resharded load reads one stored chunk for
        # several destinations): read once, in order of offset
        items = sorted(items, key=lambda it: self._slice(it).offset)
        pending = [(it, pool.submit(self._read_item, part, name, it)) for it in items]
        for item, fut in pending:
            raw = fut.result()
            if item.type == LoadItemType.BYTE_IO:
                planner.load_bytes(item, io.BytesIO(bytes(buffer_of(raw))))
                continue
            source = self._as_tensor(item, raw)
            target = planner.resolve_tensor(item).detach()
            target.copy_(source)
            planner.commit_tensor(item, target)

    def _read_item(self, part, name: str, item: ReadItem) -> torch.Tensor:
        slice_ = self._slice(item)
        if slice_.offset + slice_.length > part.size:
            raise CheckpointCorrupt(
                f"{self.store.locate(self.checkpoint_id, name)} is truncated: shard {_shard(item.storage_index)} "
                f"needs bytes {slice_.offset}-{slice_.offset + slice_.length} and the file has {part.size}; "
                "restore an earlier checkpoint"
            )
        raw = aligned_bytes(slice_.length)
        align = self.store.alignment
        for k, (at, n) in enumerate(slice_.chunks()):
            if n == 0:
                continue
            ask = round_up(n, align) if align > 1 else n
            view = buffer_of(raw[at : at + ask]) if at + ask <= raw.numel() else buffer_of(raw[at:])
            with self.totals.log.request(len(view)):
                got = _read_all(part, view, slice_.offset + at)
            if got < n:
                raise CheckpointCorrupt(
                    f"{self.store.locate(self.checkpoint_id, name)} is truncated: shard "
                    f"{_shard(item.storage_index)} ends at byte {slice_.offset + at + got} of "
                    f"{slice_.offset + slice_.length}; restore an earlier checkpoint"
                )
            if slice_.crcs and crc32c.crc32c(view[:n]) != slice_.crcs[k]:
                start = slice_.offset + at
                raise CheckpointCorrupt(
                    f"{self.store.locate(self.checkpoint_id, name)} is corrupt: shard {_shard(item.storage_index)} "
                    f"fails its checksum in bytes {start}-{start + n}; restore an earlier checkpoint"
                )
        return raw[: slice_.length]

    def _as_tensor(self, item: ReadItem, raw: torch.Tensor) -> torch.Tensor:
        meta = self.metadata.state_dict_metadata[item.storage_index.fqn] if self.metadata else None
        if not isinstance(meta, TensorStorageMetadata):
            raise CheckpointCorrupt(f"shard {_shard(item.storage_index)}: the metadata holds no tensor for it")
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
