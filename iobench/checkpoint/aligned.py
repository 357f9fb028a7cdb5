"""Page-aligned host memory for O_DIRECT, and a buffer view of any CPU tensor's bytes.

O_DIRECT wants the buffer, the file offset and the length aligned to the device's logical block;
the page (4096) is aligned for every block size in use, so every part offset and buffer here is.
"""

from __future__ import annotations

import ctypes
import mmap

import torch

ALIGN = 4096


def round_up(n: int, to: int = ALIGN) -> int:
    return -(-n // to) * to


def aligned_bytes(nbytes: int) -> torch.Tensor:
    """A uint8 tensor of ``nbytes`` (rounded up to a page) on fresh anonymous pages: page-aligned,
    zero-filled, freed with the tensor."""
    area = mmap.mmap(-1, max(ALIGN, round_up(nbytes)), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return torch.frombuffer(area, dtype=torch.uint8)


def byte_view(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bytes as a flat uint8 tensor sharing its memory (a contiguous copy if it is not)."""
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.reshape(-1).view(torch.uint8) if t.dim() else t.reshape(1).view(torch.uint8)


def buffer_of(t: torch.Tensor) -> memoryview:
    """A writable buffer over a contiguous uint8 CPU tensor's memory, without a copy (os.pwrite and
    os.preadv take it; bfloat16 and other dtypes numpy lacks are viewed as uint8 first)."""
    if t.dtype != torch.uint8 or not t.is_contiguous() or t.device.type != "cpu":
        raise ValueError("buffer_of needs a contiguous uint8 CPU tensor")
    n = t.numel()
    if n == 0:
        return memoryview(bytearray())
    return memoryview((ctypes.c_char * n).from_address(t.data_ptr())).cast("B")


def is_aligned(t: torch.Tensor) -> bool:
    return t.data_ptr() % ALIGN == 0
