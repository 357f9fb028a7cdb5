"""Where each item of a rank's save goes: which part, at which offset, cut into which requests.

Every item starts on an aligned offset, so a store that needs aligned requests (O_DIRECT) writes
each request of an item whole and pads only the last one; every other store keeps the same layout,
and a checkpoint reads the same whichever way it was written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .aligned import ALIGN, round_up


@dataclass(frozen=True)
class PartSlice:
    """Where one saved item's bytes are (a WriteResult's storage_data): the part, the offset and
    length, and the CRC32C of each ``chunk`` bytes of it (empty: saved without checksums)."""

    part: str
    offset: int
    length: int
    chunk: int
    crcs: tuple[int, ...] = ()

    def chunks(self) -> list[tuple[int, int]]:
        """(offset within the item, length) of each request."""
        return [(at, min(self.chunk, self.length - at)) for at in range(0, self.length, self.chunk)] or [
            (0, 0)
        ]


@dataclass(frozen=True)
class RankPrefix:
    """A rank's prefix for its part names (a SavePlan's storage_data)."""

    prefix: str


def assign(sizes: Sequence[int], parts: int) -> list[int]:
    """Each item's part: the largest first, each to the part with the fewest bytes so far."""
    load = [0] * parts
    out = [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        p = min(range(parts), key=load.__getitem__)
        out[i] = p
        load[p] += round_up(sizes[i], ALIGN)
    return out


def offsets(
    sizes: Sequence[int], part_of: Sequence[int], parts: int, align: int = ALIGN
) -> tuple[list[int], list[int]]:
    """Each item's offset in its part, a multiple of ``align`` (in item order), and each part's
    whole length."""
    ends = [0] * parts
    out = []
    for size, p in zip(sizes, part_of, strict=True):
        out.append(ends[p])
        ends[p] += round_up(max(size, 1), align)
    return out, ends
