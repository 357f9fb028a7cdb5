"""Shard formats read into the same ``Sample`` (base.py): tar (WebDataset) and Parquet, each with
its reader and its writer, found by suffix or name in one table (table.py); and one object per
sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "DEFAULT_MAX_MEMBER_BYTES": "base",
    "DEFAULT_ROW_GROUP": "parquet_writer",
    "FORMATS": "table",
    "FormatWriter": "base",
    "ParquetFormatError": "parquet",
    "ParquetReader": "parquet",
    "ParquetWriter": "parquet_writer",
    "ReadCounter": "base",
    "SCHEMA": "parquet_writer",
    "Sample": "base",
    "ShardFormat": "table",
    "ShardFormatError": "base",
    "ShardIndexError": "tar_index",
    "ShardReader": "base",
    "TarReader": "tar_reader",
    "TarWriter": "tar_writer",
    "archive_bytes": "tar_writer",
    "count_tar_samples": "tar",
    "format_named": "table",
    "format_of": "table",
    "index_component": "tar_writer",
    "index_path": "tar_index",
    "index_text": "tar_writer",
    "iter_parquet_samples": "parquet",
    "iter_samples": "tar",
    "member_bytes": "tar_writer",
    "read_objects": "sample_objects",
    "reader_for": "table",
    "writer_class": "table",
}
__all__ = [
    "DEFAULT_MAX_MEMBER_BYTES",
    "DEFAULT_ROW_GROUP",
    "FORMATS",
    "SCHEMA",
    "FormatWriter",
    "ParquetFormatError",
    "ParquetReader",
    "ParquetWriter",
    "ReadCounter",
    "Sample",
    "ShardFormat",
    "ShardFormatError",
    "ShardIndexError",
    "ShardReader",
    "TarReader",
    "TarWriter",
    "archive_bytes",
    "count_tar_samples",
    "format_named",
    "format_of",
    "index_component",
    "index_path",
    "index_text",
    "iter_parquet_samples",
    "iter_samples",
    "member_bytes",
    "read_objects",
    "reader_for",
    "writer_class",
]

if TYPE_CHECKING:
    from loaders.formats.base import (
        DEFAULT_MAX_MEMBER_BYTES,
        FormatWriter,
        ReadCounter,
        Sample,
        ShardFormatError,
        ShardReader,
    )
    from loaders.formats.parquet import ParquetFormatError, ParquetReader, iter_parquet_samples
    from loaders.formats.parquet_writer import DEFAULT_ROW_GROUP, SCHEMA, ParquetWriter
    from loaders.formats.sample_objects import read_objects
    from loaders.formats.table import FORMATS, ShardFormat, format_named, format_of, reader_for, writer_class
    from loaders.formats.tar import count_tar_samples, iter_samples
    from loaders.formats.tar_index import ShardIndexError, index_path
    from loaders.formats.tar_reader import TarReader
    from loaders.formats.tar_writer import TarWriter, archive_bytes, index_component, index_text, member_bytes

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
