"""Hostile input, shards: corrupt, truncated and mutated tars, JPEGs and Parquet shards
(property-based, hypothesis), and names built to escape a directory. Manifests, sweep files,
overrides and report strings: test_hostile_metadata.py.

Every property is the same: the input gives the right samples, or an error of the documented type
whose message says what is wrong and where; never another exception, never a hang (each example
runs under a 10 s alarm), never a file written outside its place, never an allocation the size of a
declared (rather than a present) length.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import subprocess
import sys
import tarfile
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loaders.formats.parquet import ParquetFormatError, iter_parquet_samples
from loaders.formats.tar import BLOCK, Sample, ShardFormatError, iter_samples, split_key
from loaders.observe.stages import StageStats
from loaders.pipeline.samples import PipelineSpec, SampleError, process_sample
from loaders.storage.shardcache import ShardCache
from tests.helpers.faultkit import FUZZ, no_hang
from tests.helpers.paths import ROOT as REPO
from tests.helpers.shardkit import tiny_jpeg

ROOT = str(REPO)


def _tar(members: list[tuple[str, bytes]], fmt: int = tarfile.USTAR_FORMAT) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


SAMPLES = [(f"{i:06d}", tiny_jpeg(i, 16, 16), str(i).encode()) for i in range(3)]
SHARD = _tar([m for key, jpg, cls in SAMPLES for m in ((f"{key}.jpg", jpg), (f"{key}.cls", cls))])
PAX_SHARD = _tar(
    [("d/" + "k" * 120 + ".jpg", b"x" * 10), ("d/" + "k" * 120 + ".cls", b"1")], tarfile.PAX_FORMAT
)


def _parse(data: bytes, max_member_bytes: int = 1 << 20) -> list[Sample]:
    with no_hang():
        return list(iter_samples(io.BytesIO(data), "s3://b/hostile.tar", max_member_bytes))


def _with_checksum(header: bytearray) -> bytearray:
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % (sum(header) & 0o777777)
    return header


# ---- tar shards ---------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=4 * BLOCK))
def test_random_bytes_are_samples_or_a_shard_format_error(data):
    with contextlib.suppress(ShardFormatError):
        _parse(data)


@FUZZ
@given(
    base=st.sampled_from([SHARD, PAX_SHARD]),
    flips=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=8),
)
def test_mutated_shards_are_samples_or_a_shard_format_error(base, flips):
    data = bytearray(base)
    for at, value in flips:
        data[at % len(data)] = value
    with contextlib.suppress(ShardFormatError):
        _parse(bytes(data))


@FUZZ
@given(
    field=st.sampled_from([(100, 108), (124, 136), (148, 156), (156, 157), (257, 265), (345, 500)]),
    value=st.binary(min_size=1, max_size=155),
)
def test_mutated_header_fields_with_a_valid_checksum_are_handled(field, value):
    """The checksum is recomputed, so the mutation reaches the field parsers (size, kind, prefix)."""
    data = bytearray(SHARD)
    start, end = field
    data[start:end] = value[: end - start].ljust(end - start, b"\0")
    data[:BLOCK] = _with_checksum(bytearray(data[:BLOCK]))
    with contextlib.suppress(ShardFormatError):
        _parse(bytes(data))


@FUZZ
@given(cut=st.integers(0, len(SHARD)))
def test_a_truncated_shard_yields_whole_samples_then_an_error_naming_the_offset(cut):
    got: list[Sample] = []
    error = None
    with no_hang():
        try:
            for sample in iter_samples(io.BytesIO(SHARD[:cut]), "s3://b/cut.tar"):
                got.append(sample)
        except ShardFormatError as exc:
            error = exc
    if error is None:  # cut inside the end-of-archive padding: nothing of the data is missing
        assert len(got) == len(SAMPLES)
    else:
        assert "s3://b/cut.tar" in str(error) and "byte offset" in str(error)
    for sample, (key, jpg, cls) in zip(got, SAMPLES, strict=False):  # never a short sample
        assert (sample.key, sample.parts) == (key, {"jpg": jpg, "cls": cls})


def test_a_pax_record_of_length_zero_is_an_error_not_a_loop():
    header = bytearray(_tar([("a.jpg", b"x")], tarfile.PAX_FORMAT)[:BLOCK])
    body = b"0 path=x\n"
    header[124:136] = b"%011o\0" % len(body)
    header[156:157] = b"x"
    data = bytes(_with_checksum(header)) + body.ljust(BLOCK, b"\0") + SHARD
    with pytest.raises(ShardFormatError, match="malformed pax extended header"):
        _parse(data)


@pytest.mark.parametrize("declared", [200 * 2**20, 2**62])
def test_a_huge_declared_member_size_allocates_nothing(declared):
    """200 MiB (under the default 256 MiB limit) with 1 kB behind it, and 2**62 (GNU base-256)."""
    header = bytearray(_tar([("000000.jpg", b"")])[:BLOCK])
    header[124:136] = b"%011o\0" % declared if declared < 8**11 else b"\x80" + declared.to_bytes(11, "big")
    path_data = bytes(_with_checksum(header)) + b"x" * 1024
    tracemalloc.start()
    try:
        with pytest.raises(ShardFormatError) as info, no_hang():
            list(iter_samples(io.BufferedReader(io.BytesIO(path_data)), "s3://b/big.tar"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ("only 1024 follow" in str(info.value)) or ("over the" in str(info.value))
    assert peak < 16 * 2**20, f"{peak} bytes allocated for a {declared}-byte declaration"


@pytest.mark.parametrize("name", ["../../escape", "/etc/passwd", "a/../../../b", "..", "\\..\\x", "c:/x"])
def test_hostile_member_names_are_keys_and_never_reach_the_disk(tmp_path, name, monkeypatch):
    data = _tar([(f"{name}.jpg", tiny_jpeg(0, 16, 16)), (f"{name}.cls", b"5")])
    monkeypatch.chdir(tmp_path)
    before = sorted(p for p in tmp_path.parent.rglob("*"))
    samples = _parse(data)  # a name is split into key and extension (webdataset's rule), nothing more
    assert [s.key for s in samples] == sorted({split_key(f"{name}.jpg")[0], split_key(f"{name}.cls")[0]})
    assert sorted(v for s in samples for v in s.parts.values()) == sorted([tiny_jpeg(0, 16, 16), b"5"])
    assert sorted(p for p in tmp_path.parent.rglob("*")) == before


@FUZZ
@given(url=st.text(max_size=300))
def test_a_cache_entry_lives_in_the_cache_directory_whatever_the_url(tmp_path_factory, url):
    directory = tmp_path_factory.getbasetemp() / "cache-names"
    path = Path(ShardCache(directory, 1000).path_for(url))
    assert path.parent == directory and not path.name.startswith(".")


# ---- JPEG and Parquet ---------------------------------------------------------------------------

JPEG = tiny_jpeg(7, 40, 56)


@FUZZ
@given(
    cut=st.integers(0, len(JPEG)), flips=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=6)
)
def test_corrupt_jpegs_are_skipped_and_counted_or_decoded(cut, flips):
    data = bytearray(JPEG[:cut])
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    sample = Sample(key="000001", url="s3://b/t.tar", offset=0, parts={"jpg": bytes(data), "cls": b"1"})
    stats = StageStats()
    with no_hang():
        out = process_sample(sample, PipelineSpec(), random.Random(0), stats)
    if out is None:
        assert stats.errors == {"corrupt_sample": 1} and "'000001'" in stats.error_examples[0]
    with pytest.raises(SampleError) if out is None else contextlib.nullcontext(), no_hang():
        process_sample(sample, PipelineSpec(on_error="fail"), random.Random(0), StageStats())


_DECODE_IN_2GB = """
import resource, sys, types
pkg = types.ModuleType("loaders"); pkg.__path__ = [{root!r} + "/loaders"]; sys.modules["loaders"] = pkg
from loaders.pipeline.decode import CorruptImage, decode_jpeg
data = bytes.fromhex(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
try:
    decode_jpeg(data)
    print("decoded")
except CorruptImage as exc:
    print("CorruptImage", exc)
"""


def test_a_jpeg_declaring_huge_dimensions_is_refused_without_allocating():
    data = bytearray(tiny_jpeg(1))
    sof = data.find(b"\xff\xc0")
    data[sof + 5 : sof + 9] = (60000).to_bytes(2, "big") * 2  # height, width
    proc = subprocess.run(
        [sys.executable, "-c", _DECODE_IN_2GB.format(root=ROOT), data.hex()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.startswith("CorruptImage"), proc.stdout + proc.stderr[-500:]


@pytest.fixture(scope="module")
def parquet_shard(tmp_path_factory) -> bytes:
    from iobench.datasets.parquet import ParquetShardWriter

    out = tmp_path_factory.mktemp("hostile-parquet")
    with ParquetShardWriter(out, 10**6, row_group=2) as w:
        for key, jpg, cls in SAMPLES:
            w.add(key, [("jpg", jpg), ("cls", cls)])
    [path] = out.glob("*.parquet")
    return path.read_bytes()


@FUZZ
@given(cut=st.integers(1, 10**6), flips=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=6))
def test_corrupt_parquet_shards_are_samples_or_a_format_error(parquet_shard, cut, flips):
    data = bytearray(parquet_shard[: max(1, cut % (len(parquet_shard) + 1))])
    for at, value in flips:
        data[at % len(data)] = value
    for raw in (io.BytesIO(bytes(data)), _Stream(bytes(data))):  # seekable, and a forward-only stream
        with contextlib.suppress(ShardFormatError), no_hang():
            list(iter_parquet_samples(raw, "s3://b/hostile.parquet", max_buffer_bytes=1 << 20))


class _Stream(io.RawIOBase):
    """Forward-only, like an object-store stream."""

    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), len(self._data) - self._pos)
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


def test_a_corrupt_shard_read_by_a_dataloader_worker_raises_its_own_error_type(tmp_path):
    """torch re-raises a worker's exception as ``type(message)``: the format errors must survive
    that, or training code catching ShardFormatError would see a bare RuntimeError."""
    from loaders import ShardLoader

    (tmp_path / "cut.tar").write_bytes(SHARD[:1000])
    loader = ShardLoader([str(tmp_path / "cut.tar")], workers=1, batch_size=2, on_error="fail")
    error = None
    try:
        list(loader)
    except ShardFormatError as exc:
        error = exc.with_traceback(None)  # frees the DataLoader iterator now (see test_fault_proxy.py)
    assert re.search(r"cut\.tar: member '000000\.jpg' declares \d+ bytes but only 488 follow", str(error))
    assert type(ParquetFormatError(str(ParquetFormatError("u", "bad", 1, 10)))) is ParquetFormatError


# ------------------------------------------------------------------ through each object client


@pytest.fixture(scope="module")
def hostile_bucket(ceph_lab):
    """A bucket of the lab holding a good shard, a corrupt one (random bytes of a tar's size) and
    one cut short (its first 1000 bytes); and the name of one that is missing."""
    import uuid

    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=ceph_lab.env["AWS_ENDPOINT_URL"],
        aws_access_key_id=ceph_lab.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=ceph_lab.env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    bucket = f"hostile-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    objects = {
        "good.tar": SHARD,
        "corrupt.tar": random.Random(7).randbytes(len(SHARD)),
        "cut.tar": SHARD[:1000],
    }
    for key, body in objects.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)
    return f"s3://{bucket}", {f"s3://{bucket}/{k}": len(v) for k, v in objects.items()}


@pytest.mark.parametrize("client", ["s3fs", "minio", "s3torchconnector", "obstore", "s3dlio"])
def test_corrupt_and_missing_objects_are_named_whatever_the_client(
    ceph_lab, hostile_bucket, client, monkeypatch
):
    """The same errors, naming the object, through every client: a corrupt shard and one cut short
    are ShardFormatErrors at their offset (under on_error="fail"; "skip" skips and counts them:
    test_lost_samples.py), a missing one an ObjectStoreError saying so at once."""
    from loaders import ShardLoader
    from loaders.storage import ObjectStoreError, SourceSpec

    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    url, sizes = hostile_bucket
    spec = SourceSpec(client=client, deadline_s=20, shard_sizes=sizes)

    def first_error(shard: str) -> BaseException:
        loader = ShardLoader([f"{url}/{shard}"], workers=0, batch_size=2, source=spec, on_error="fail")
        with pytest.raises((ShardFormatError, ObjectStoreError)) as info:
            list(loader)
        return info.value

    assert sum(len(b[1]) for b in ShardLoader([f"{url}/good.tar"], workers=0, batch_size=2, source=spec)) == 3
    corrupt = first_error("corrupt.tar")
    assert isinstance(corrupt, ShardFormatError) and f"{url}/corrupt.tar" in str(corrupt)
    assert "byte offset 0" in str(corrupt)
    cut = first_error("cut.tar")
    assert isinstance(cut, ShardFormatError) and re.search(
        rf"{url}/cut\.tar: member '000000\.jpg' declares", str(cut)
    )
    missing = first_error("missing.tar")
    assert isinstance(missing, ObjectStoreError)
    assert f"{url}/missing.tar" in str(missing) and "no such bucket or object" in str(missing)
    assert "attempts" not in str(missing)  # at once: no retry spent on it
