"""A part of a tar shard read by byte range, from the shard's index.

The index is DALI's ``fn.readers.webdataset`` file (``train-000000.idx`` beside
``train-000000.tar``, format v1.2: a first line ``v1.2 <samples>``, then one line per sample of
``<ext> <data offset> <size> <member name>`` groups). ``iobench dataset synth`` and ``pack``
write it; ``iobench dataset index`` rebuilds it. The index records where members are and how
big, nothing about the shard as a whole, so a stale one shows when the bytes it points at are
read: every sample of a part is checked against it (the offset of its first member, the size of
each member, the number of samples), and a mismatch stops the reader with the shard named.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator
from typing import BinaryIO

from loaders.formats.base import DEFAULT_MAX_MEMBER_BYTES, Sample, ShardFormatError
from loaders.formats.tar import BLOCK, Resync, iter_samples

VERSION = "v1.2"
REBUILD_COMMAND = "iobench dataset index"

# per sample: (extension, data offset, size) of each member, in the shard's order
Members = tuple[tuple[str, int, int], ...]


class ShardIndexError(ShardFormatError):
    """A tar shard's index is missing, unreadable or stale (it does not describe the shard's bytes).

    Constructible from its message alone, as ShardFormatError is (a DataLoader worker's exception
    reaches the training loop rebuilt from its message)."""

    def __init__(self, url: str, problem: str | None = None) -> None:
        if problem is None:
            ValueError.__init__(self, url)
            self.url, self.offset, self.problem = url, -1, None
            return
        folder = posixpath.dirname(url.removeprefix("file://")) or "."
        ValueError.__init__(
            self,
            f"{url}: {problem}. Shards fewer than readers (workers x ranks) are split by sample, and "
            f"each part is read by byte range from the shard's index: rebuild the indexes with "
            f"`{REBUILD_COMMAND} {folder}` (object stores: rebuild them locally and upload again), or "
            "use at least as many shards as readers",
        )
        self.url, self.offset, self.problem = url, -1, problem


def index_path(url: str) -> str:
    """``.../train-000000.tar`` -> ``.../train-000000.idx`` (works for s3:// too)."""
    stem = url[: -len(".tar")] if url.endswith(".tar") else url
    return stem + ".idx"


def parse_index(text: str) -> list[Members]:
    """The samples of an index file's text; ValueError saying which line is malformed."""
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if len(head) != 2 or head[0] != VERSION or not head[1].isdigit():
        raise ValueError(f"its first line is not '{VERSION} <samples>'")
    samples: list[Members] = []
    for number, line in enumerate(lines[1:], 2):
        fields = line.split()
        if not fields or len(fields) % 4:
            raise ValueError(f"line {number} is not groups of '<ext> <offset> <size> <name>'")
        try:
            samples.append(
                tuple(
                    (fields[i].lower(), int(fields[i + 1]), int(fields[i + 2]))
                    for i in range(0, len(fields), 4)
                )
            )
        except ValueError:
            raise ValueError(f"line {number} has an offset or size that is not a number") from None
    if len(samples) != int(head[1]):
        raise ValueError(f"its first line declares {head[1]} samples but it lists {len(samples)}")
    return samples


def load_index(url: str, read_object: Callable[[str], bytes]) -> list[Members]:
    """The index of shard ``url``, read with ``read_object(index url)``; ShardIndexError when it is
    missing or malformed."""
    where = index_path(url)
    try:
        text = read_object(where).decode("ascii")
    except FileNotFoundError:
        raise ShardIndexError(url, f"its index {where} is missing") from None
    except UnicodeDecodeError:
        raise ShardIndexError(url, f"its index {where} is not an index (not ASCII text)") from None
    try:
        return parse_index(text)
    except ValueError as exc:
        raise ShardIndexError(url, f"its index {where} is malformed: {exc}") from None


def byte_range(index: list[Members], url: str, start: int, stop: int) -> tuple[int, int]:
    """The bytes holding samples ``[start, stop)``: from the first one's first header to the end
    of the last one's last member, padded to a block."""
    if stop > len(index):
        raise ShardIndexError(
            url, f"its index lists {len(index)} samples, but the shard has at least {stop} (stale index)"
        )
    first, last = index[start][0], index[stop - 1][-1]
    end = last[1] + last[2]
    return first[1] - BLOCK, end + (-end % BLOCK)


def iter_range_samples(
    raw: BinaryIO,
    url: str,
    index: list[Members],
    start: int,
    stop: int,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    resync: Resync | None = None,
) -> Iterator[Sample]:
    """Samples ``[start, stop)`` of the shard, ``raw`` being positioned at the first one's header
    (:func:`byte_range`); each checked against the index as it comes. ``resync``: go on past
    damage (iter_samples), the samples after it numbered by the index."""
    begin, end = byte_range(index, url, start, stop)
    ranged = ArchiveRange(raw, url, begin, end, lenient=resync is not None and resync.skips)
    n = start
    for sample in iter_samples(ranged, url, max_member_bytes, at=begin, first=start, resync=resync):
        n = sample.index
        if n >= stop:
            _stale(
                url, f"it has more samples between bytes {begin} and {end} than its index's {stop - start}"
            )
        members = index[n]
        sizes = {ext: len(data) for ext, data in sample.parts.items()}
        if sample.offset != members[0][1] - BLOCK or sizes != {ext: size for ext, _, size in members}:
            _stale(
                url,
                f"sample {n} (key {sample.key!r}) is at byte {sample.offset} with members {sizes}, "
                f"its index says byte {members[0][1] - BLOCK} with { {e: s for e, _, s in members} }",
            )
        n += 1
        if n == stop:
            ranged.uncount(sample)
        yield sample
    if n != stop and (resync is None or not resync.skips):  # skipping: a gap to the end was told
        _stale(url, f"bytes {begin} to {end} hold {n - start} samples, its index says {stop - start}")


def _stale(url: str, what: str) -> None:
    raise ShardIndexError(url, f"its index {index_path(url)} does not describe the shard (stale): {what}")


class ArchiveRange:
    """Bytes [begin, end) of a shard, then the tar end-of-archive marker, so that the tar reader
    reads the range as a whole archive. A shard that ends first was rewritten since the range was
    taken: ``placed`` says who placed members up to ``end`` (the index, by default: a stale index)."""

    _END = bytes(2 * BLOCK)

    def __init__(
        self, raw: BinaryIO, url: str, begin: int, end: int, placed: str = "", *, lenient: bool = False
    ) -> None:
        self.raw, self.url, self.at, self.end = raw, url, begin, end
        self.tail = self._END
        self.placed = placed
        self.lenient = lenient  # a shard that ends first reads as cut short there (damage), no error

    def read(self, n: int = -1) -> bytes:
        left = self.end - self.at
        if n < 0:
            n = max(0, left) + len(self.tail)
        if left <= 0:
            data, self.tail = self.tail[:n], self.tail[n:]
            return data
        data = self.raw.read(min(n, left))
        if not data:
            if self.lenient:
                self.tail = b""
                return b""
            if self.placed:
                raise ShardFormatError(
                    self.url, self.at, f"the shard ends here, but {self.placed} up to byte {self.end}"
                )
            _stale(
                self.url, f"its index places members up to byte {self.end}, but the shard ends at {self.at}"
            )
        self.at += len(data)
        return data

    def uncount(self, last: Sample) -> None:
        """The end-of-archive marker read after the range's last sample is ours, not the storage's."""
        last.read_bytes -= len(self._END) - len(self.tail)
