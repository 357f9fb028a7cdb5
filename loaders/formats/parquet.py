"""Parquet shards -> samples: the second shard format, read into the same ``Sample`` as tar.

A Parquet shard has one row per sample: ``key`` (string), an image column (``jpg``, binary) and
``cls`` (integer label). Parquet keeps its schema and row-group offsets in a footer at the *end*
of the file, so it cannot be streamed front to back the way a tar can:

- a seekable file (local disk, the shard cache, fsspec files) is read one row group at a time
  through ``pyarrow.parquet.ParquetFile``: memory stays at one row group (~110 MB for 1,000
  ImageNet-sized JPEGs) plus the footer;
- a forward-only stream (``ShardSource.open`` on ``s3://`` / ``rados://`` without a cache) is
  first read whole into memory, then parsed from there. Shards are at most ~128 MB, so that is
  one shard of RAM per reader; ``max_buffer_bytes`` refuses anything absurd instead.

Every byte read from the storage and the wall/CPU time spent reading it is attributed to the
samples (``read_bytes``, ``fetch_wall_s``, ``fetch_cpu_s``), spread over the rows of each row
group in proportion to their size, so the pipeline's fetch stage sums to what reading cost.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, BinaryIO, NoReturn

import pyarrow as pa
import pyarrow.parquet as pq

from loaders.formats.base import (
    DEFAULT_OPTIONS,
    WHOLE_SHARD,
    Extent,
    IndexedSpan,
    Opener,
    ReadCounter,
    ReadOptions,
    Sample,
    ShardFormatError,
    charged,
)
from loaders.observe.losses import Loss
from loaders.observe.stages import clocks, since

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer  # a type checker's name for what readinto writes into

KEY_COLUMN = "key"
LABEL_COLUMN = "cls"
IMAGE_COLUMNS = ("jpg", "jpeg", "png", "webp")  # the pipeline's IMAGE_EXTS, in its order
DEFAULT_MAX_BUFFER_BYTES = 2 * 2**30
_CHUNK = 8 * 2**20
_READ_BUFFER = 2**20


class ParquetFormatError(ShardFormatError):
    """A Parquet shard is unreadable (truncated, corrupt) or lacks a required column.

    A ``ShardFormatError``, so code that handles broken tar shards handles these too.
    ``offset`` is the byte offset of the row group when known, else -1.
    """

    def __init__(self, url: str, problem: str = "", row_group: int | None = None, offset: int = -1) -> None:
        if not problem:  # rebuilt from its message (see ShardFormatError)
            ValueError.__init__(self, url)
            self.url, self.problem, self.row_group, self.offset = url, None, None, -1
            return
        where = ""
        if row_group is not None:
            where = f" (row group {row_group}" + (f" at byte offset {offset})" if offset >= 0 else ")")
        ValueError.__init__(self, f"{url}{where}: {problem}")
        self.url, self.problem, self.row_group, self.offset = url, problem, row_group, offset


class _CountingFile(io.RawIOBase):
    """The caller's seekable file, counting the bytes of every read pyarrow makes through it.

    It also remembers an exception raised by the underlying file, so a storage failure (a
    network error under the shard cache, say) is re-raised as itself rather than reported as
    a corrupt shard.
    """

    def __init__(self, raw: BinaryIO, counter: ReadCounter) -> None:
        super().__init__()
        self._raw, self._counter = raw, counter
        self.storage_error: BaseException | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        try:
            return self._raw.seek(pos, whence)
        except BaseException as exc:
            self.storage_error = exc
            raise

    def tell(self) -> int:
        return self._raw.tell()

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._raw.read(size)
        except BaseException as exc:
            self.storage_error = exc
            raise
        self._counter.bytes += len(data)
        return data

    def readinto(self, b: WriteableBuffer) -> int:
        with memoryview(b) as view, view.cast("B") as into:  # any writable buffer, as bytes
            data = self.read(len(into))
            into[: len(data)] = data
        return len(data)


def _is_seekable(raw: BinaryIO) -> bool:
    probe = getattr(raw, "seekable", None)
    try:
        return bool(probe()) if callable(probe) else False
    except (OSError, ValueError):
        return False


def _read_all(raw: BinaryIO, url: str, counter: ReadCounter, limit: int) -> pa.Buffer:
    buf = bytearray()
    while chunk := raw.read(_CHUNK):
        buf += chunk
        if len(buf) > limit:
            raise ParquetFormatError(
                url,
                f"stream is over the {limit}-byte in-memory limit for non-seekable Parquet shards; "
                "read it through the shard cache (seekable) or write smaller shards",
            )
    counter.bytes += len(buf)
    return pa.py_buffer(buf)  # zero-copy view of the bytearray


def _columns(schema: pa.Schema, url: str) -> tuple[list[str], list[str]]:
    """(image columns present, columns to read); a missing key/label/image column is fatal."""
    names = set(schema.names)
    images = [c for c in IMAGE_COLUMNS if c in names]
    for column, what in ((KEY_COLUMN, "sample key"), (LABEL_COLUMN, "label")):
        if column not in names:
            raise ParquetFormatError(
                url, f"no {column!r} column ({what}); the shard has columns {sorted(names)}"
            )
    if not images:
        raise ParquetFormatError(
            url, f"no image column (one of {list(IMAGE_COLUMNS)}); the shard has columns {sorted(names)}"
        )
    label_type = schema.field(LABEL_COLUMN).type
    if not (pa.types.is_integer(label_type) or pa.types.is_string(label_type)):
        raise ParquetFormatError(url, f"column {LABEL_COLUMN!r} is {label_type}, expected an integer")
    # Only the columns a sample needs are read: projection is one thing Parquet does that tar can't.
    return images, [KEY_COLUMN, *images, LABEL_COLUMN]


def _spread(total: float, weights: Sequence[int]) -> list[float]:
    """``total`` split in proportion to ``weights`` (cumulative, so the parts sum exactly)."""
    whole = sum(weights) or 1
    out, cum, prev = [], 0, 0.0
    for w in weights:
        cum += w
        edge = total * cum / whole
        out.append(edge - prev)
        prev = edge
    return out


def iter_parquet_samples(
    raw: BinaryIO,
    url: str,
    *,
    verify_checksums: bool = False,
    max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES,
    rows: tuple[int, int | None] | None = None,
    lost: Callable[[Loss], None] | None = None,
) -> Iterator[Sample]:
    """Yield one ``Sample`` per row: ``parts`` holds the image column(s) and ``cls`` as ASCII.

    Seekable ``raw``: read row group by row group (bounded memory). Non-seekable ``raw`` (an
    object-store stream): read whole into memory first, since the footer comes last.
    ``offset`` (and ``index``) is the row index in the file. A null label omits ``cls`` (the pipeline then
    reports the sample as unlabelled, as for a tar sample without ``.cls``); a null image omits
    that part likewise. ``verify_checksums=True`` checks the pages' CRC32 where the writer
    stored them (ours do), so corruption inside the JPEG bytes is an error here rather than a
    bad image later. Off by default, like pyarrow's: it adds ~20-40% to the read time here
    (pyarrow's CRC runs at ~1 GB/s), and the tar path it is compared with verifies no payload
    either (the manifest's sha256 is the integrity check, at staging). ``rows=(start, stop)``:
    only those rows (``stop`` None: to the end), reading only the row groups that hold them (a part
    of a shard that several readers share, a resumed position); the rows of those groups outside it
    are read and charged to the rows yielded.
    Truncated or corrupt shards and missing columns raise ``ParquetFormatError`` (a ValueError)
    naming the file and, when known, the row group. With ``lost``, a row group that cannot be read
    is told to it (its bytes and rows) and the next one is read: the footer says where each is. A
    shard whose footer cannot be read has nothing to go on from, and fails either way.
    """
    counter = ReadCounter()  # bytes taken from the storage
    counting: _CountingFile | None = None
    w0, c0 = time.perf_counter(), time.thread_time()
    if _is_seekable(raw):
        counting = _CountingFile(raw, counter)
        source: pa.NativeFile | _CountingFile = counting
    else:
        source = pa.BufferReader(_read_all(raw, url, counter, max_buffer_bytes))

    def fail(exc: BaseException, what: str, row_group: int | None = None, offset: int = -1) -> NoReturn:
        if counting is not None and counting.storage_error is not None:
            raise counting.storage_error  # the storage failed, not the format
        detail = " ".join(str(exc).split())  # Arrow messages span lines and may carry raw bytes
        raise ParquetFormatError(url, f"{what}: {detail}", row_group, offset) from exc

    try:
        # buffer_size: read column chunks in 1 MiB slices rather than one ~110 MB read each:
        # peak memory drops by a row group's worth of raw pages, at no measured cost in speed
        pf = pq.ParquetFile(source, buffer_size=_READ_BUFFER, page_checksum_verification=verify_checksums)
    except (pa.ArrowException, OSError, ValueError) as exc:
        fail(exc, "not a readable Parquet file (truncated, or corrupt footer)")
    images, columns = _columns(pf.schema_arrow, url)
    md = pf.metadata
    firsts, lo, hi, groups = _row_groups_holding(md, rows)
    opened = (counter.bytes, time.perf_counter() - w0, time.thread_time() - c0)
    upfront = _upfront(opened, md, groups, seekable=counting is not None)
    for n, rg in enumerate(groups):
        offset = _row_group_offset(md, rg)
        bytes_before = counter.bytes
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            # use_threads=False: loader workers are the parallelism; Arrow's pool would oversubscribe
            table = pf.read_row_group(rg, columns=columns, use_threads=False)
            keys = table.column(KEY_COLUMN).to_pylist()
            labels = table.column(LABEL_COLUMN).to_pylist()
            blobs = {c: table.column(c).to_pylist() for c in images}
        except (pa.ArrowException, OSError, ValueError) as exc:
            if lost is None or (counting is not None and counting.storage_error is not None):
                fail(exc, "cannot read row group (truncated or corrupt)", rg, offset)
            lost(_group_lost(url, md, rg, range(max(lo, firsts[rg]), min(hi, firsts[rg + 1])), exc))
            continue
        del table
        # Wall/CPU include decoding pages into Python bytes: that is this format's fetch cost,
        # as parsing headers and copying members is tar's.
        cost = (
            counter.bytes - bytes_before + upfront[n][0],
            time.perf_counter() - w0 + upfront[n][1],
            time.thread_time() - c0 + upfront[n][2],
        )
        wanted = range(max(0, lo - firsts[rg]), min(len(keys), hi - firsts[rg]))
        yield from _rows(url, keys, labels, blobs, firsts[rg], wanted, cost, last=hi - 1)


def _row_groups_holding(
    md: pq.FileMetaData, rows: tuple[int, int | None] | None
) -> tuple[list[int], int, int, list[int]]:
    """The row groups that hold ``rows`` (all rows where None): each group's first row (and the
    file's row count last), the rows' start and end clipped to the file, and the groups' numbers."""
    firsts = list(accumulate((md.row_group(i).num_rows for i in range(md.num_row_groups)), initial=0))
    lo, hi = rows if rows is not None else (0, None)
    hi = firsts[-1] if hi is None else min(hi, firsts[-1])
    groups = [rg for rg in range(md.num_row_groups) if firsts[rg] < hi and firsts[rg + 1] > lo]
    return firsts, lo, hi, groups


def _group_lost(url: str, md: pq.FileMetaData, rg: int, rows: range, exc: BaseException) -> Loss:
    """Row group ``rg``, which could not be read, as the rows of it that were wanted and its bytes."""
    group = md.row_group(rg)
    begin = _row_group_offset(md, rg)
    end = begin + sum(group.column(c).total_compressed_size for c in range(group.num_columns))
    detail = " ".join(str(exc).split())[:200]
    return Loss(
        url,
        begin,
        end,
        len(rows),
        rows.start,
        f"row group {rg} cannot be read (truncated or corrupt): {detail}",
    )


def _upfront(
    opened: tuple[int, float, float], md: pq.FileMetaData, groups: list[int], *, seekable: bool
) -> list[tuple[int, float, float]]:
    """Costs paid before any row group (the footer; for a stream, the whole file), per row group
    read: the seekable path charges them to the first row group, where a reader really waits for
    them; the stream path shares them by row-group size, so per-batch fetch costs look alike in both."""
    if seekable or not groups:
        return [opened] + [(0, 0.0, 0.0)] * max(0, len(groups) - 1)
    sizes = [max(1, md.row_group(rg).total_byte_size) for rg in groups]
    return list(
        zip(
            _integer_shares(opened[0], sizes),
            _spread(opened[1], sizes),
            _spread(opened[2], sizes),
            strict=True,
        )
    )


def _rows(
    url: str,
    keys: list,
    labels: list,
    blobs: dict[str, list],
    first: int,
    wanted: range,
    cost: tuple[int, float, float],
    last: int,
) -> Iterator[Sample]:
    """The samples of rows ``wanted`` of a row group whose first row is ``first``, sharing what the
    row group cost (bytes, wall, CPU) in proportion to their size."""
    weights = [len(keys[i] or "") + 8 + sum(len(b[i] or b"") for b in blobs.values()) for i in wanted]
    byte_shares = _integer_shares(cost[0], weights)
    wall_shares, cpu_shares = _spread(cost[1], weights), _spread(cost[2], weights)
    for share, i in enumerate(wanted):
        key, row = keys[i], first + i
        parts = {name: column[i] for name, column in blobs.items() if column[i] is not None}
        label = labels[i]
        if label is not None:
            parts[LABEL_COLUMN] = label.encode() if isinstance(label, str) else str(label).encode()
        yield Sample(
            key=key if key is not None else f"row-{row}",
            url=url,
            offset=row,
            parts=parts,
            read_bytes=byte_shares[share],
            fetch_wall_s=wall_shares[share],
            fetch_cpu_s=cpu_shares[share],
            index=row,
            span=(row, row + 1),
            final=row == last,
        )


class ParquetReader:
    """:class:`loaders.formats.base.ShardReader` for Parquet shards: a part, a resumed position or
    samples read again are rows, read from the row groups that hold them (a forward-only stream is
    read whole first: its footer comes last)."""

    def read(
        self, source: Opener, url: str, extent: Extent = WHOLE_SHARD, options: ReadOptions = DEFAULT_OPTIONS
    ) -> Iterator[Sample]:
        if extent.empty:
            return
        clock = clocks()
        with source.open(url) as raw:
            wall, cpu = since(clock)
            rows = None if extent.start == 0 and extent.stop is None else (extent.start, extent.stop)
            yield from charged(iter_parquet_samples(raw, url, rows=rows, lost=options.lost), wall, cpu)

    def reread(
        self, source: Opener, url: str, spans: Sequence[IndexedSpan], options: ReadOptions = DEFAULT_OPTIONS
    ) -> Iterator[Sample]:
        wanted = {index for index, _, _ in spans}
        if not wanted:
            return
        got = [s for s in self.read(source, url, Extent(min(wanted), max(wanted) + 1)) if s.index in wanted]
        if len(got) != len(wanted):
            missing = sorted(wanted - {s.index for s in got})
            raise ParquetFormatError(
                url, f"rows {missing[:5]} that a saved position names are not in the shard"
            )
        yield from got

    def count(self, path: str) -> int:
        try:
            return int(pq.ParquetFile(path).metadata.num_rows)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise ParquetFormatError(path, f"not a readable Parquet file: {exc}") from exc


def _row_group_offset(md: pq.FileMetaData, rg: int) -> int:
    """Byte offset where row group ``rg`` starts (its first page), for error messages; -1 if unknown."""
    group = md.row_group(rg)
    if not group.num_columns:
        return -1
    first = group.column(0)
    return first.dictionary_page_offset if first.has_dictionary_page else first.data_page_offset


def _integer_shares(total: int, weights: Sequence[int]) -> list[int]:
    whole = sum(weights) or 1
    out, cum, prev = [], 0, 0
    for w in weights:
        cum += w
        edge = total * cum // whole
        out.append(edge - prev)
        prev = edge
    return out
