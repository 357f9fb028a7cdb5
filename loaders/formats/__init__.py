"""Shard formats read into the same ``Sample``: tar (WebDataset), Parquet, and one object per
sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "DEFAULT_MAX_MEMBER_BYTES": "tar",
    "ParquetFormatError": "parquet",
    "ReadCounter": "tar",
    "Sample": "tar",
    "ShardFormatError": "tar",
    "ShardIndexError": "tar_index",
    "count_tar_samples": "tar",
    "iter_parquet_samples": "parquet",
    "iter_samples": "tar",
    "read_objects": "sample_objects",
}
__all__ = [
    "DEFAULT_MAX_MEMBER_BYTES",
    "ParquetFormatError",
    "ReadCounter",
    "Sample",
    "ShardFormatError",
    "ShardIndexError",
    "count_tar_samples",
    "iter_parquet_samples",
    "iter_samples",
    "read_objects",
]

if TYPE_CHECKING:
    from loaders.formats.parquet import ParquetFormatError, iter_parquet_samples
    from loaders.formats.sample_objects import read_objects
    from loaders.formats.tar import (
        DEFAULT_MAX_MEMBER_BYTES,
        ReadCounter,
        Sample,
        ShardFormatError,
        count_tar_samples,
        iter_samples,
    )
    from loaders.formats.tar_index import ShardIndexError

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
