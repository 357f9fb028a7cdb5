"""The table of shard formats: the one dispatch on a shard's suffix, its readers and writers."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from loaders.formats import (
    FORMATS,
    ParquetReader,
    TarReader,
    format_named,
    format_of,
    reader_for,
    writer_class,
)
from loaders.formats.tar import iter_samples


def test_a_shard_is_read_by_its_suffix_and_tar_is_the_default():
    assert isinstance(reader_for("s3://b/train-000001.parquet"), ParquetReader)
    assert isinstance(reader_for("/data/train-000001.tar"), TarReader)
    assert format_of("/data/shards.v2/train-1").name == "wds"  # a dot in a folder is not a suffix
    assert [f.name for f in FORMATS] == ["wds", "parquet"]
    with pytest.raises(ValueError, match="format='zip': allowed values are wds, parquet"):
        format_named("zip")


def test_each_format_writes_what_its_reader_reads():
    samples = [(f"{i:06d}", [("jpg", bytes([i]) * (100 + i)), ("cls", str(i).encode())]) for i in range(5)]
    for shard_format in FORMATS:
        stream = io.BytesIO()
        writer = writer_class(shard_format.name)(stream)
        for key, members in samples:
            bound = writer.size_with(key, members)  # what the shard would be, closed after this one
            writer.add(key, members)
        beside = writer.close()
        # the bound the dataset's writer rolls shards over by: exact for tar, an upper bound for Parquet
        assert writer.samples == 5 and len(stream.getvalue()) <= bound
        assert (len(stream.getvalue()) == bound) == (shard_format.name == "wds")
        stream.seek(0)
        if shard_format.name == "wds":
            got = [(s.key, sorted(s.parts.items())) for s in iter_samples(stream, "x.tar")]
            assert set(beside) == {".idx"} and beside[".idx"].startswith(b"v1.2 5\njpg 512 100 000000.jpg ")
        else:
            table = pq.read_table(stream)
            got = [
                (k, sorted([("cls", str(c).encode()), ("jpg", j)]))
                for k, j, c in zip(*(table[c].to_pylist() for c in ("key", "jpg", "cls")), strict=True)
            ]
            assert beside == {}
        assert got == [(key, sorted(members)) for key, members in samples]
