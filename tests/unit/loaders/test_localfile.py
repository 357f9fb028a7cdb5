"""Local shards open mapped, behave as a binary file, and fall back to a buffered file where a
mapping cannot be made."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import threading

from loaders.formats.tar import iter_samples
from loaders.storage.localfile import MappedFile, open_local
from loaders.storage.sources import ShardSource
from loaders.storage.spec import SourceSpec


def _shard(path, n: int = 3) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for i in range(n):
            for ext, data in (("jpg", bytes([i]) * (50_000 + i)), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"{i:04d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    path.write_bytes(out.getvalue())
    return out.getvalue()


def test_a_regular_file_is_mapped_and_reads_seeks_and_tells_like_a_file(tmp_path):
    data = _shard(tmp_path / "s.tar")
    with open_local(str(tmp_path / "s.tar")) as f:
        assert isinstance(f, MappedFile) and f.readable() and f.seekable()
        assert f.read(10) == data[:10] and f.tell() == 10
        f.seek(len(data) - 5)
        assert f.read(100) == data[-5:] and f.read(1) == b""
    assert f.closed


def test_the_tar_reader_reads_the_same_samples_mapped_as_buffered(tmp_path):
    _shard(tmp_path / "s.tar")
    path = str(tmp_path / "s.tar")
    with open_local(path) as mapped, open(path, "rb") as buffered:
        got = [(s.key, s.parts, s.read_bytes) for s in iter_samples(mapped, path)]
        want = [(s.key, s.parts, s.read_bytes) for s in iter_samples(buffered, path)]
    assert got == want and len(got) == 3


def test_an_empty_file_opens_buffered(tmp_path):
    (tmp_path / "empty.tar").write_bytes(b"")
    with open_local(str(tmp_path / "empty.tar")) as f:
        assert not isinstance(f, MappedFile) and f.read() == b""


def test_a_pipe_opens_buffered_and_streams(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(b"abc" * 1000))
    writer.start()
    with open_local(str(fifo)) as f:
        assert not isinstance(f, MappedFile) and f.read() == b"abc" * 1000
    writer.join()


def test_the_shard_source_reads_local_shards_through_the_mapping_and_closes_it(tmp_path):
    _shard(tmp_path / "s.tar")
    source = ShardSource(SourceSpec())
    with source.open(str(tmp_path / "s.tar")) as f:
        assert isinstance(f, MappedFile)
        assert [s.key for s in iter_samples(f, "s.tar")] == ["0000", "0001", "0002"]
    assert f.closed


_READ_AFTER_A_SHRINK = """
import os, sys
from loaders.storage.localfile import open_local
from loaders.formats.tar import ShardFormatError, iter_samples
path = sys.argv[1]
with open_local(path) as f:
    samples = iter_samples(f, path)
    first = next(samples)
    os.truncate(path, 4096)
    try:
        next(samples)
    except ShardFormatError as exc:
        print("error:", exc)
"""


def test_a_mapped_shard_that_shrinks_while_read_is_an_error_not_a_bus_error(tmp_path):
    """In a process of its own: were the read made, the kernel's SIGBUS would end the process."""
    data = _shard(tmp_path / "s.tar")
    path = str(tmp_path / "s.tar")
    proc = subprocess.run([sys.executable, "-c", _READ_AFTER_A_SHRINK, path], capture_output=True, text=True)
    assert proc.returncode == 0, f"exit {proc.returncode} (-7: SIGBUS): {proc.stderr[-2000:]}"
    assert proc.stdout.startswith(
        f"error: {path}: the shard shrank from {len(data):,} to 4,096 bytes while it was read"
    ), proc.stdout
