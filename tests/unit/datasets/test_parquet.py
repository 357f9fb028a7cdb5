"""Parquet shards: written by synth/pack/convert with the same samples as the tar shards, read back
into the pipeline's ``Sample`` from seekable files and forward-only streams alike."""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iobench.datasets.manifest import Manifest, verify
from iobench.datasets.pack import pack_imagefolder
from iobench.datasets.parquet import ParquetShardWriter, convert_to_parquet
from iobench.datasets.synth import ensure_dataset, synthesize
from loaders.formats import SCHEMA, ParquetFormatError, ShardFormatError, iter_parquet_samples
from loaders.pipeline.samples import SampleError, label_of
from tests.helpers.shardkit import dataset_members, tiny_jpeg

ROW_GROUP = 10
TINY = {"samples": 256, "seed": 3, "shard_bytes": 3_600_000}  # conftest's tiny_dataset request


@pytest.fixture(scope="module")
def parquet_dataset(tmp_path_factory, tiny_dataset: Path) -> Path:
    """The conftest tiny dataset's request, in Parquet (tiny_dataset first: calibration is shared)."""
    out = tmp_path_factory.mktemp("tiny-parquet")
    synthesize(out, format="parquet", row_group=ROW_GROUP, **TINY)
    return out


def tar_rows(directory: Path) -> list[tuple[str, int, bytes]]:
    """(key, label, jpg) read with tarfile: independent of both our readers."""
    return [(k, int(p["cls"]), p["jpg"]) for k, p in dataset_members(directory).items()]


def parquet_rows(directory: Path) -> list[tuple[str, int, bytes]]:
    """(key, label, jpg) read with plain pyarrow."""
    rows = []
    for path in Manifest.load(directory).shard_paths(directory):
        t = pq.read_table(path)
        rows += zip(t["key"].to_pylist(), t["cls"].to_pylist(), t["jpg"].to_pylist(), strict=True)
    return rows


def as_tuples(samples) -> list[tuple[str, int, bytes, bytes | None]]:
    return [(s.key, s.offset, s.parts["jpg"], s.parts.get("cls")) for s in samples]


class ForwardOnly:
    """What an object-store stream offers: read(), no seek."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)
        self.reads = 0

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        return self._f.read(n)


class NotSeekable(io.RawIOBase):
    """Like loaders.storage.objectstore._ChunkStream: an io object whose seekable() says False."""

    def __init__(self, data: bytes) -> None:
        self._f = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        data = self._f.read(len(b))
        b[: len(data)] = data
        return len(data)


def write_table(path: Path, table: pa.Table, **kwargs) -> Path:
    pq.write_table(table, path, **kwargs)
    return path


# --- writing ------------------------------------------------------------------------------------


def test_synth_parquet_and_wds_of_one_seed_hold_identical_samples(tiny_dataset, parquet_dataset):
    tar, par = tar_rows(tiny_dataset), parquet_rows(parquet_dataset)
    assert len(par) == TINY["samples"]
    assert par == tar  # same keys, labels and JPEG bytes, in the same order
    assert sorted(par) == sorted(tar)


def test_row_groups_schema_and_encodings(parquet_dataset):
    manifest = Manifest.load(parquet_dataset)
    for entry, path in zip(manifest.shards, manifest.shard_paths(parquet_dataset), strict=True):
        assert path.name.startswith("train-") and path.suffix == ".parquet"
        f = pq.ParquetFile(path)
        assert f.schema_arrow.remove_metadata() == SCHEMA
        sizes = [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)]
        assert sum(sizes) == entry.samples
        assert all(n == ROW_GROUP for n in sizes[:-1]) and 1 <= sizes[-1] <= ROW_GROUP
        for i in range(f.metadata.num_row_groups):
            jpg = f.metadata.row_group(i).column(1)
            assert jpg.path_in_schema == "jpg"
            # JPEG is already entropy-coded: stored as is, no dictionary, no min/max statistics
            assert jpg.compression == "UNCOMPRESSED" and not jpg.has_dictionary_page
            assert jpg.statistics is None
        assert entry.bytes <= TINY["shard_bytes"]


def test_manifest_format_and_checksums(parquet_dataset, tiny_dataset):
    manifest = Manifest.load(parquet_dataset)
    assert manifest.format == "parquet"
    assert manifest.source["format"] == "parquet" and manifest.source["row_group"] == ROW_GROUP
    assert verify(parquet_dataset, manifest) == []  # sizes and sha256
    for entry, path in zip(manifest.shards, manifest.shard_paths(parquet_dataset), strict=True):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256
        assert path.stat().st_size == entry.bytes
    assert not list(parquet_dataset.glob("*.tar")) and not list(parquet_dataset.glob("*.idx"))
    assert not list(parquet_dataset.glob(".*.tmp"))  # no temporaries left behind
    # the same samples, a little less overhead than tar (no 512-byte headers and padding)
    wds = Manifest.load(tiny_dataset)
    assert manifest.mean_jpeg_bytes == pytest.approx(wds.mean_jpeg_bytes)
    assert manifest.total_bytes < wds.total_bytes


def test_convert_gives_the_same_bytes_as_synth(tiny_dataset, parquet_dataset, tmp_path):
    converted = convert_to_parquet(tiny_dataset, tmp_path / "conv", row_group=ROW_GROUP)
    synthesised = Manifest.load(parquet_dataset)
    assert converted.format == "parquet" and converted.source["generator"] == "convert"
    # same rows, same writer settings, same roll-over: byte-identical shards
    assert [(s.name, s.sha256) for s in converted.shards] == [(s.name, s.sha256) for s in synthesised.shards]
    with pytest.raises(ValueError, match="different directory"):
        convert_to_parquet(tiny_dataset, tiny_dataset)


def test_ensure_dataset_tells_the_formats_apart(tmp_path):
    request = {"samples": 6, "seed": 1, "shard_bytes": 2**20}
    first = ensure_dataset(tmp_path, format="parquet", row_group=4, **request)
    stamp = [p.stat().st_mtime_ns for p in first.shard_paths(tmp_path)]
    again = ensure_dataset(tmp_path, format="parquet", row_group=4, **request)
    assert [p.stat().st_mtime_ns for p in again.shard_paths(tmp_path)] == stamp  # reused
    wds = ensure_dataset(tmp_path, **request)  # same request in tar: regenerated, old shards gone
    assert wds.format == "wds" and "format" not in wds.source  # tar manifests as before
    assert sorted(p.name for p in tmp_path.glob("train-*")) == ["train-000000.idx", "train-000000.tar"]
    with pytest.raises(ValueError, match="format='zip'"):
        synthesize(tmp_path, format="zip", **request)


def test_writer_rolls_over_before_the_limit_and_keeps_oversized_samples(tmp_path):
    jpgs = [tiny_jpeg(i) for i in range(40)]  # ~5 KB each
    limit = 40_000
    with ParquetShardWriter(tmp_path, limit, row_group=3) as w:
        for i, data in enumerate(jpgs):
            w.add(f"{i:06d}", [("jpg", data), ("cls", str(i).encode())])
        w.add("big", [("jpg", b"\xff\xd8\xff" + bytes(3 * limit))])  # alone in its shard, over the limit
    assert len(w.entries) > 2
    assert all(e.bytes <= limit for e in w.entries[:-1])
    assert w.entries[-1].samples == 1 and w.entries[-1].bytes > limit
    assert sum(e.samples for e in w.entries) == 41
    big = pq.read_table(tmp_path / w.entries[-1].name)
    assert big["cls"].to_pylist() == [None]  # no cls member: a null label
    w2 = ParquetShardWriter(tmp_path, limit)
    with pytest.raises(ValueError, match="jpg and cls"):
        w2.add("k", [("png", b"x"), ("cls", b"1")])
    with pytest.raises(ValueError, match="not an integer"):
        w2.add("k", [("jpg", b"x"), ("cls", b"dog")])
    assert w2.close() == []  # nothing was accepted, nothing published


def test_pack_imagefolder_as_parquet(tmp_path):
    expected: dict[bytes, str] = {}
    classes = ["b_class", "a_class"]
    for k, cls in enumerate(classes):
        d = tmp_path / "train" / cls
        d.mkdir(parents=True)
        for j in range(3):
            data = tiny_jpeg(10 * k + j)
            (d / f"{j}.JPEG").write_bytes(data)
            expected[data] = cls
    (tmp_path / "train" / "a_class" / "notes.txt").write_text("skip me")
    out = tmp_path / "packed"
    manifest = pack_imagefolder(tmp_path, out, shard_bytes=2**20, format="parquet", row_group=4)
    assert manifest.format == "parquet" and manifest.class_names == sorted(classes)
    assert manifest.source["skipped"] == 1 and manifest.num_samples == 6
    assert verify(out, manifest) == []
    rows = parquet_rows(out)
    assert [k for k, _, _ in rows] == [f"{i:06d}" for i in range(6)]
    assert {jpg: manifest.class_names[label] for _, label, jpg in rows} == expected
    f = pq.ParquetFile(manifest.shard_paths(out)[0])
    assert [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)] == [4, 2]


# --- reading ------------------------------------------------------------------------------------


def test_seekable_and_stream_reads_give_the_same_samples(parquet_dataset):
    manifest = Manifest.load(parquet_dataset)
    for entry, path in zip(manifest.shards, manifest.shard_paths(parquet_dataset), strict=True):
        data = path.read_bytes()
        with open(path, "rb") as f:
            seekable = list(iter_parquet_samples(f, str(path)))
        stream = list(iter_parquet_samples(ForwardOnly(data), str(path)))
        raw_io = list(iter_parquet_samples(NotSeekable(data), str(path)))
        assert as_tuples(seekable) == as_tuples(stream) == as_tuples(raw_io)
        assert [s.offset for s in seekable] == list(range(entry.samples))
        assert all(s.url == str(path) and set(s.parts) == {"jpg", "cls"} for s in seekable)
        # a stream is read exactly once, whole; a seekable file at least once (footer + row groups)
        assert sum(s.read_bytes for s in stream) == entry.bytes
        assert sum(s.read_bytes for s in seekable) >= entry.bytes
        assert all(s.fetch_wall_s >= 0 and s.fetch_cpu_s >= 0 for s in seekable + stream)
        assert sum(s.fetch_wall_s for s in seekable) > 0
    table = pq.read_table(path)
    assert [int(s.parts["cls"]) for s in seekable] == table["cls"].to_pylist()


def test_truncated_and_corrupt_files_raise_clear_errors(parquet_dataset, tmp_path):
    path = Manifest.load(parquet_dataset).shard_paths(parquet_dataset)[0]
    data = path.read_bytes()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(data[: len(data) // 2])
    for raw in (io.BytesIO(cut.read_bytes()), ForwardOnly(cut.read_bytes())):  # seekable, stream
        with pytest.raises(ParquetFormatError, match="truncated") as info:
            list(iter_parquet_samples(raw, str(cut)))
        assert str(cut) in str(info.value)
        assert isinstance(info.value, ShardFormatError) and isinstance(info.value, ValueError)
    not_parquet = tmp_path / "x.parquet"
    not_parquet.write_bytes(b"PAR1 but not really" * 100)
    with open(not_parquet, "rb") as f, pytest.raises(ParquetFormatError, match=r"x\.parquet"):
        list(iter_parquet_samples(f, str(not_parquet)))
    # a flipped byte inside the JPEG bytes of row group 1: caught by the page checksums
    meta = pq.ParquetFile(path).metadata
    jpg = meta.row_group(1).column(1)
    bad = bytearray(data)
    bad[jpg.data_page_offset + jpg.total_compressed_size // 2] ^= 0xFF
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(bytes(bad))
    with (
        open(corrupt, "rb") as f,
        pytest.raises(
            ParquetFormatError, match=r"\(row group 1 at byte offset \d+\).*(?i:crc|checksum)"
        ) as info,
    ):
        list(iter_parquet_samples(f, str(corrupt), verify_checksums=True))
    assert str(corrupt) in str(info.value) and info.value.row_group == 1
    assert 0 < info.value.offset <= jpg.data_page_offset  # where row group 1 starts
    # the samples before the bad row group were delivered first
    with open(corrupt, "rb") as f:
        it = iter_parquet_samples(f, str(corrupt), verify_checksums=True)
        first = [next(it) for _ in range(ROW_GROUP)]
    assert [s.offset for s in first] == list(range(ROW_GROUP))
    # without verification (the default, as tar) the JPEG bytes come through as stored
    with open(corrupt, "rb") as f:
        assert len(list(iter_parquet_samples(f, str(corrupt)))) == meta.num_rows
    # a corrupt page header is caught either way
    bad = bytearray(data)
    bad[jpg.data_page_offset : jpg.data_page_offset + 16] = b"\xff" * 16
    corrupt.write_bytes(bytes(bad))
    with open(corrupt, "rb") as f, pytest.raises(ParquetFormatError, match=r"\(row group 1 at .*page header"):
        list(iter_parquet_samples(f, str(corrupt)))


def test_storage_errors_stay_storage_errors(parquet_dataset):
    path = Manifest.load(parquet_dataset).shard_paths(parquet_dataset)[0]

    class Flaky(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            if self.tell() < 1000:  # the footer reads work, the data reads fail
                raise ConnectionResetError("peer went away")
            return super().read(n)

    with pytest.raises(ConnectionResetError):
        list(iter_parquet_samples(Flaky(path.read_bytes()), str(path)))


def test_stream_over_the_memory_limit_is_refused(parquet_dataset):
    path = Manifest.load(parquet_dataset).shard_paths(parquet_dataset)[0]
    with pytest.raises(ParquetFormatError, match="in-memory limit"):
        list(iter_parquet_samples(ForwardOnly(path.read_bytes()), str(path), max_buffer_bytes=1000))


def test_missing_columns_are_named(tmp_path):
    no_cls = write_table(tmp_path / "nocls.parquet", pa.table({"key": ["a"], "jpg": [b"\xff\xd8"]}))
    with open(no_cls, "rb") as f, pytest.raises(ParquetFormatError, match="no 'cls' column") as info:
        list(iter_parquet_samples(f, str(no_cls)))
    assert str(no_cls) in str(info.value) and "['jpg', 'key']" in str(info.value)
    no_img = write_table(tmp_path / "noimg.parquet", pa.table({"key": ["a"], "cls": [1]}))
    with pytest.raises(ParquetFormatError, match="no image column"):
        list(iter_parquet_samples(ForwardOnly(no_img.read_bytes()), str(no_img)))
    float_cls = write_table(tmp_path / "float.parquet", pa.table({"key": ["a"], "jpg": [b"x"], "cls": [1.5]}))
    with pytest.raises(ParquetFormatError, match="expected an integer"):
        list(iter_parquet_samples(ForwardOnly(float_cls.read_bytes()), str(float_cls)))


def test_null_label_is_a_sample_without_cls(tmp_path):
    table = pa.table(
        {"key": ["a", "b", "c"], "jpg": [b"1", None, b"3"], "cls": [7, None, 9]},
        schema=SCHEMA,
    )
    path = write_table(tmp_path / "nulls.parquet", table)
    with open(path, "rb") as f:
        samples = list(iter_parquet_samples(f, str(path)))
    assert [s.key for s in samples] == ["a", "b", "c"]
    assert samples[0].parts == {"jpg": b"1", "cls": b"7"}
    assert samples[1].parts == {}  # null label and null image: both parts omitted
    with pytest.raises(SampleError, match=r"'b' has no label"):
        label_of(samples[1])
    assert label_of(samples[2]) == 9


# --- through the loader -------------------------------------------------------------------------


def test_shard_loader_reads_parquet_like_tar(tiny_dataset, parquet_dataset):
    from loaders import AugmentSpec, ShardLoader

    def pairs(directory: Path) -> Counter:
        urls = [str(p) for p in Manifest.load(directory).shard_paths(directory)]
        loader = ShardLoader(
            urls, batch_size=32, workers=0, return_batches=True, augment=AugmentSpec(size=32)
        )
        out: Counter = Counter()
        for batch in loader:
            out.update(zip(batch.keys, batch.labels.tolist(), strict=True))
        assert not loader.stats.errors
        return out

    tar = pairs(tiny_dataset)
    assert sum(tar.values()) == TINY["samples"]
    assert pairs(parquet_dataset) == tar
