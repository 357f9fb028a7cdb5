"""What every shard format shares: the sample record each reader yields, the format error, the
count of bytes taken from the storage, and the protocols a format's reader and writer meet (the
table of formats, table.py, names one of each per format).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from loaders.observe.losses import Loss

DEFAULT_MAX_MEMBER_BYTES = 256 * 2**20

# where the pipeline finds a sample again (a resumed shuffle buffer, a batch left half-filled): set
# by the node that read it, e.g. (its item in the reader's list, its index in the shard, its span)
Ref = tuple[int, ...]
# a sample found again by a saved position: its index in the shard and its span, (index, begin, end)
IndexedSpan = tuple[int, int, int]


class ShardFormatError(ValueError):
    """A shard is not well formed: truncated, bad checksum, absurd size, a missing column.

    Also constructible from its message alone: torch re-raises a DataLoader worker's exception as
    ``type(message)``, and anything else would reach the training loop as a bare RuntimeError.
    """

    def __init__(self, url: str, offset: int = -1, problem: str | None = None) -> None:
        super().__init__(url if problem is None else f"{url}: {problem} at byte offset {offset}")
        self.url, self.offset, self.problem = url, offset, problem


@dataclass
class ReadCounter:
    """Bytes read from the storage."""

    bytes: int = 0


@dataclass
class Sample:
    """One sample as a format reads it: its members' bytes by extension, and what reading it cost.

    ``offset`` says where it is for a person (a tar member's header, a Parquet row); ``index`` is its
    number in the shard and ``span`` the bytes its reading took, [begin, end) (a tar: from the end
    of the sample before it to the end of its last member's padding; Parquet: its row, row + 1), so
    that the pipeline can read it again alone; ``final``: the last sample its read yields (the
    shard's, or the requested range's)."""

    key: str
    url: str
    offset: int
    parts: dict[str, bytes] = field(default_factory=dict)
    read_bytes: int = 0
    fetch_wall_s: float = 0.0
    fetch_cpu_s: float = 0.0
    # a read made ahead of the pipeline (one object per sample): (when it was asked for, when its
    # bytes were in), time.perf_counter; None where the pipeline reads as it goes (a shard stream)
    read: tuple[float, float] | None = None
    index: int = 0
    span: tuple[int, int] = (0, 0)
    final: bool = False
    ref: Ref = ()


def local_path(url: str) -> str | None:
    """The file system path of a local shard URL (no scheme or ``file://``), else None."""
    if url.startswith("file://"):
        return url[len("file://") :]
    return None if "://" in url else url


def charged(samples: Iterator[Sample], wall: float, cpu: float) -> Iterator[Sample]:
    """The samples, the first one charged ``wall`` and ``cpu`` seconds more (opening the shard)."""
    for sample in samples:
        sample.fetch_wall_s += wall
        sample.fetch_cpu_s += cpu
        wall = cpu = 0.0
        yield sample


class _Sizes(Protocol):
    @property
    def shard_sizes(self) -> Mapping[str, int]:  # read-only: SourceSpec is frozen
        """The shards' sizes where known (a manifest's)."""
        ...


class Opener(Protocol):
    """What a format's reader reads through: ``loaders.storage.ShardSource`` (its layers: object
    stores, files, the shard cache, a throttle)."""

    @property
    def spec(self) -> _Sizes: ...  # read-only: a source's own spec (a SourceSpec) has more

    def open(self, url: str, start: int = 0, end: int | None = None) -> AbstractContextManager[BinaryIO]:
        """The shard as a stream from byte ``start``; past ``end`` nothing is needed."""
        ...

    def read_object(self, url: str) -> bytes:
        """A whole (small) object."""
        ...


@dataclass(frozen=True)
class Extent:
    """Where a read goes in a shard: samples ``[start, stop)`` (``stop`` None: to its end), numbered
    from ``start``. ``at``: the byte where sample ``start``'s reading begins, when known (a resumed
    cursor), else 0 and the reader finds it. ``ranged``: most of the shard is other readers' (fewer
    shards than readers): read only these samples' bytes."""

    start: int = 0
    stop: int | None = None
    at: int = 0
    ranged: bool = False

    @property
    def empty(self) -> bool:
        return self.stop is not None and self.stop <= self.start


@dataclass(frozen=True)
class ReadOptions:
    """How a format reads, the pipeline's for every read and reread of its shards.
    ``max_member_bytes``: a larger member is damage, not data. ``lost``: a damaged region is
    skipped, told to it as a :class:`~loaders.observe.losses.Loss` (the samples of this read it
    held), and reading goes on where the format can find its place again; None: damage is a
    ShardFormatError."""

    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES
    lost: Callable[[Loss], None] | None = None


WHOLE_SHARD = Extent()
DEFAULT_OPTIONS = ReadOptions()


class ShardReader(Protocol):
    """How the pipeline reads one shard format: samples from a position, samples again by their
    spans, and a local shard's sample count. The table of formats (table.py) picks one by suffix."""

    def read(
        self, source: Opener, url: str, extent: Extent = WHOLE_SHARD, options: ReadOptions = DEFAULT_OPTIONS
    ) -> Iterator[Sample]:
        """The samples of ``extent``; opening the shard is charged to the first sample."""
        ...

    def reread(
        self, source: Opener, url: str, spans: Sequence[IndexedSpan], options: ReadOptions = DEFAULT_OPTIONS
    ) -> Iterator[Sample]:
        """The samples of ``spans`` ((index, begin, end) as :attr:`Sample.span` gave them, ascending),
        read again, each alone or with its neighbours: a resumed shuffle buffer's. They were read
        whole once, so damage here is a ShardFormatError whatever ``options.lost`` says."""
        ...

    def count(self, path: str) -> int:
        """The samples of a local shard, cheaply (headers, a footer); ShardFormatError if malformed."""
        ...


class FormatWriter(Protocol):
    """Writes one shard of a format to a binary stream (front to back, never sought), sample by
    sample; the dataset's writer chooses when a shard is full, and publishes it and what goes beside
    it. Made by the format's writer class from the stream and the format's own options."""

    samples: int  # written so far

    def size_with(self, key: str, members: Sequence[tuple[str, bytes]]) -> int:
        """The shard's final size, at most, were this sample added and the shard closed then."""
        ...

    def add(self, key: str, members: Sequence[tuple[str, bytes]]) -> None:
        """The sample ``key`` with its members ``[(ext, data), ...]``, in that order."""
        ...

    def close(self) -> dict[str, bytes]:
        """Finish the shard (an end marker, a footer); the files that go beside it, by suffix (a
        tar's index: ``{".idx": ...}``). The stream stays the caller's."""
        ...
