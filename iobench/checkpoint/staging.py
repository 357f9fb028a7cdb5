"""The staging of an asynchronous save with reused (pinned) host buffers: the training loop blocks
only for the device-to-host copy, then trains on while the copy is written.

The buffers are allocated once, on the first save, page-aligned (so the O_DIRECT writer writes them
without a copy of its own) and, where CUDA is, registered with the driver as pinned memory: a pinned
copy runs at the link's speed and asynchronously on a side stream; the save waits for that stream
alone. A later save reuses the same buffers, so no save pays for fresh pages (first-touch faults cost
about as much as the copy). This is the GPU path; on a host without CUDA the same code copies CPU
tensors into the same buffers.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from .aligned import aligned_bytes


class HostStager:
    """An ``AsyncStager`` for ``dcp.async_save`` (torch.distributed.checkpoint.staging)."""

    _synchronize_after_execute = False

    def __init__(self, pin: bool = True) -> None:
        self.pin = pin and torch.cuda.is_available()
        self._buffers: dict[str, torch.Tensor] = {}
        self._registered: list[int] = []
        self._stream = torch.cuda.Stream() if self.pin else None

    @property
    def should_synchronize_after_execute(self) -> bool:
        return False

    def stage(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``state_dict`` whose tensors live in this stager's host buffers; returns when the
        copies are done (a save must not race the next step's updates to the source)."""
        if self._stream is not None:
            self._stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self._stream):
                staged = self._copy("", state_dict)
            self._stream.synchronize()
            return staged
        return self._copy("", state_dict)

    def synchronize_staging(self) -> None:
        """Nothing to wait for: :meth:`stage` returns with its copies done."""

    def close(self) -> None:
        if self._registered:
            cudart = torch.cuda.cudart()
            for ptr in self._registered:
                cudart.cudaHostUnregister(ptr)
        self._registered.clear()
        self._buffers.clear()

    def _copy(self, path: str, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._copy(f"{path}/{k}", v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._copy(f"{path}/{i}", v) for i, v in enumerate(value))
        local = getattr(value, "_local_tensor", None)
        if local is not None:  # a DTensor: stage its shard, keep its placement
            from torch.distributed.tensor import DTensor

            shard = self._tensor(path, local)
            return DTensor.from_local(
                shard,
                value.device_mesh,
                value.placements,
                run_check=False,
                shape=value.shape,
                stride=value.stride(),
            )
        if isinstance(value, torch.Tensor):
            return self._tensor(path, value)
        return copy.deepcopy(value)

    def _tensor(self, path: str, source: torch.Tensor) -> torch.Tensor:
        buf = self._buffers.get(path)
        if buf is None or buf.shape != source.shape or buf.dtype != source.dtype:
            buf = self._allocate(source)
            self._buffers[path] = buf
        buf.copy_(source.detach(), non_blocking=self.pin)
        return buf

    def _allocate(self, like: torch.Tensor) -> torch.Tensor:
        nbytes = like.numel() * like.element_size()
        raw = aligned_bytes(nbytes)
        if self.pin:
            torch.cuda.cudart().cudaHostRegister(raw.data_ptr(), raw.numel(), 0)
            self._registered.append(raw.data_ptr())
        return raw[:nbytes].view(like.dtype).reshape(like.shape)
