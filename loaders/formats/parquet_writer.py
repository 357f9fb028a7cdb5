"""Writing Parquet shards, beside their reader: columns ``key`` (string), ``jpg`` (binary, the
encoded JPEG) and ``cls`` (int64), one row per sample, in row groups of ``row_group`` samples (the
reader's unit of memory).

The ``jpg`` column is stored PLAIN, with no compression and no dictionary: JPEG is entropy-coded
already, so a codec would only burn CPU on both sides for ~0% gain, and every value is distinct.
``key`` and ``cls`` are tiny and compress well (zstd; ``cls`` dictionary-encoded). Pages carry
CRC32 checksums so a reader can tell corruption inside the JPEG bytes from a bad image. Min/max
statistics are kept off ``jpg`` (they would be two 100 KB values per page, and useless).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

DEFAULT_ROW_GROUP = 1000
SCHEMA = pa.schema([("key", pa.string()), ("jpg", pa.binary()), ("cls", pa.int64())])

# Upper bounds for the size estimate (measured with pyarrow 26: ~0.6 KiB of footer per row group,
# ~25 bytes of header per 1 MiB data page). Generous on purpose: a shard's limit must hold.
_FOOTER_BASE = 8 * 1024
_FOOTER_PER_ROW_GROUP = 2 * 1024
_PAGE_BYTES = 2**20
_PAGE_OVERHEAD = 128
_ROW_OVERHEAD = 4 + 4 + 8 + 8  # jpg and key length prefixes, cls value, definition levels


class ParquetWriter:
    """:class:`loaders.formats.base.FormatWriter` for Parquet shards. A sample's members must be
    ``jpg`` and ``cls`` (an ASCII integer); a missing ``cls`` is stored as a null label, which the
    reader reports like a tar sample without ``.cls``. ``stream`` needs ``write``, ``tell``,
    ``flush`` and ``close`` (pyarrow closes it with the shard)."""

    def __init__(self, stream: BinaryIO, *, row_group: int = DEFAULT_ROW_GROUP) -> None:
        if row_group < 1:
            raise ValueError(f"row_group must be at least 1, got {row_group}")
        self.row_group = row_group
        self._stream = stream
        self._writer = pq.ParquetWriter(
            stream,
            SCHEMA,
            compression={"key": "zstd", "jpg": "none", "cls": "zstd"},
            use_dictionary=["cls"],
            write_statistics=["key", "cls"],
            write_page_checksum=True,
        )
        self._rows: dict[str, list[Any]] = {"key": [], "jpg": [], "cls": []}
        self._pending_bytes = 0  # estimated on-disk bytes of the buffered rows
        self._row_groups = 0
        self.samples = 0

    def size_with(self, key: str, members: Sequence[tuple[str, bytes]]) -> int:
        need = _row_bytes(key, dict(members).get("jpg", b""))
        groups = self._row_groups + 1 + (len(self._rows["key"]) + 1 > self.row_group)
        return (
            self._stream.tell() + self._pending_bytes + need + _FOOTER_BASE + groups * _FOOTER_PER_ROW_GROUP
        )

    def add(self, key: str, members: Sequence[tuple[str, bytes]]) -> None:
        parts = dict(members)
        unknown = set(parts) - {"jpg", "cls"}
        if unknown or "jpg" not in parts:
            raise ValueError(f"sample {key!r}: Parquet shards hold jpg and cls members, got {sorted(parts)}")
        label = None
        if "cls" in parts:
            try:
                label = int(parts["cls"])
            except ValueError:
                raise ValueError(f"sample {key!r}: label {parts['cls'][:20]!r} is not an integer") from None
        self._rows["key"].append(key)
        self._rows["jpg"].append(parts["jpg"])
        self._rows["cls"].append(label)
        self._pending_bytes += _row_bytes(key, parts["jpg"])
        self.samples += 1
        if len(self._rows["key"]) >= self.row_group:
            self._flush_row_group()

    def close(self) -> dict[str, bytes]:
        self._flush_row_group()
        self._writer.close()
        return {}

    def _flush_row_group(self) -> None:
        if not self._rows["key"]:
            return
        table = pa.table(self._rows, schema=SCHEMA)
        self._writer.write_table(table, row_group_size=len(table))  # exactly one row group
        self._rows = {"key": [], "jpg": [], "cls": []}
        self._pending_bytes = 0
        self._row_groups += 1


def _row_bytes(key: str, jpg: bytes) -> int:
    pages = -(-len(jpg) // _PAGE_BYTES) + 1  # a value never splits, so >= 1 page boundary
    return len(jpg) + len(key.encode()) + _ROW_OVERHEAD + pages * _PAGE_OVERHEAD
