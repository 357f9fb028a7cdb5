"""The shard formats, one row each: the one place that dispatches on a shard's suffix (after
mosaicml-streaming's format tables). A row gives its reader and its writer through functions that
import them when first asked for, so pyarrow loads only where Parquet is read or written.

A URL whose suffix no row names is read as tar (WebDataset), as shards were before Parquet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from loaders.formats.base import ShardReader


def _tar_reader() -> type:
    from loaders.formats.tar_reader import TarReader

    return TarReader


def _tar_writer() -> type:
    from loaders.formats.tar_writer import TarWriter

    return TarWriter


def _parquet_reader() -> type:
    from loaders.formats.parquet import ParquetReader

    return ParquetReader


def _parquet_writer() -> type:
    from loaders.formats.parquet_writer import ParquetWriter

    return ParquetWriter


@dataclass(frozen=True)
class ShardFormat:
    name: str  # as a dataset's manifest names it
    suffix: str  # of its shard files
    reader: Callable[[], type]  # its ShardReader class
    writer: Callable[[], type]  # its FormatWriter class, made from (stream, **options)


FORMATS = (
    ShardFormat("wds", ".tar", _tar_reader, _tar_writer),
    ShardFormat("parquet", ".parquet", _parquet_reader, _parquet_writer),
)
_BY_SUFFIX = {f.suffix: f for f in FORMATS}
_BY_NAME = {f.name: f for f in FORMATS}


def format_of(url: str) -> ShardFormat:
    """The format of the shard at ``url``, by its suffix (tar unless another row claims it)."""
    dot = url.rfind(".")
    found = _BY_SUFFIX.get(url[dot:]) if dot > url.rfind("/") else None
    return found or FORMATS[0]


def format_named(name: str) -> ShardFormat:
    found = _BY_NAME.get(name)
    if found is None:
        raise ValueError(f"format={name!r}: allowed values are {', '.join(_BY_NAME)}")
    return found


@cache
def _reader(suffix: str) -> ShardReader:
    return _BY_SUFFIX[suffix].reader()()  # one per process: readers keep no state


def reader_for(url: str) -> ShardReader:
    """The reader of the shard at ``url``'s format."""
    return _reader(format_of(url).suffix)


def writer_class(name: str) -> Any:
    """The writer class of the format ``name``: ``writer_class("parquet")(stream, row_group=1000)``."""
    return format_named(name).writer()
