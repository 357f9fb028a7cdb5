"""The streaming tar reader's hot path: exact bytes at every size around the block and the
small-member boundary, the reads it makes, and fetch time charged per member (never the consumer's).
Corrupt and truncated shards: tests/reliability/test_hostile_input.py."""

from __future__ import annotations

import io
import tarfile
import time

import pytest

from loaders.formats.tar import BLOCK, SMALL_MEMBER, iter_samples
from loaders.observe.stages import set_timing


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return out.getvalue()


class CountingStream(io.BytesIO):
    """A stream that counts its reads and can make each one slow."""

    def __init__(self, data: bytes, delay: float = 0.0) -> None:
        super().__init__(data)
        self.reads, self.delay = 0, delay

    def read(self, n: int = -1) -> bytes:
        self.reads += 1
        if self.delay:
            time.sleep(self.delay)
        return super().read(n)


SIZES = [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, SMALL_MEMBER - 1, SMALL_MEMBER, SMALL_MEMBER + 1, 300_001]


def test_members_of_every_size_come_back_exact_and_every_byte_read_is_counted():
    members = [(f"{i:04d}.bin", bytes([i % 251]) * size) for i, size in enumerate(SIZES)]
    shard = _tar(members)
    samples = list(iter_samples(io.BytesIO(shard), "file:///s.tar"))
    assert [(s.key, s.parts["bin"]) for s in samples] == [(n.split(".")[0], d) for n, d in members]
    # every byte was read and charged to a sample: with the shard's size unknown, what follows the
    # end-of-archive block is read too (zeros to the end: the end; data: zeroed damage)
    assert sum(s.read_bytes for s in samples) == len(shard)


def test_a_small_member_comes_in_one_read_with_its_padding_and_the_next_header():
    image, label = b"j" * (SMALL_MEMBER + 1), b"7"
    shard = _tar([(f"{k}.{ext}", data) for k in ("a", "b") for ext, data in (("jpg", image), ("cls", label))])
    stream = CountingStream(shard)
    assert len(list(iter_samples(stream, "file:///s.tar"))) == 2
    # the first header; per sample the image exactly, its padding + the next header, and the
    # label with its padding and the next header in one read; with the shard's size unknown, what
    # follows the end-of-archive block: the zeros to the end, and the end of the stream (twice)
    assert stream.reads == 1 + 2 * 3 + 3


@pytest.fixture
def timing():
    set_timing(True)
    yield
    set_timing(True)


def test_fetch_time_is_the_reads_and_never_the_consumers_time(timing):
    shard = _tar([("a.jpg", b"x" * 2000), ("a.cls", b"1"), ("b.jpg", b"y" * 2000), ("b.cls", b"2")])
    stream = CountingStream(shard, delay=0.01)
    samples = []
    for sample in iter_samples(stream, "file:///s.tar"):
        samples.append(sample)
        time.sleep(0.2)  # the training step: not the storage's time
    total = sum(s.fetch_wall_s for s in samples)
    assert stream.reads * 0.01 <= total < stream.reads * 0.01 + 0.1


def test_with_timing_off_no_fetch_time_is_charged_but_bytes_are(timing):
    shard = _tar([("a.jpg", b"x" * 2000), ("a.cls", b"1")])
    set_timing(False)
    (sample,) = iter_samples(CountingStream(shard, delay=0.01), "file:///s.tar")
    assert (sample.fetch_wall_s, sample.fetch_cpu_s) == (0.0, 0.0)
    # two headers, the padded image and label, the end-of-archive block, and, the shard's size not
    # known, tar's record padding after it (zeros to the end: no damage hides there)
    assert sample.read_bytes == len(shard)


def _reference_ok(header: bytes) -> bool:
    """POSIX's rule, byte by byte: the sum of the header with its checksum field as spaces."""
    stored = header[148:156].split(b"\0", 1)[0].strip()
    return bool(stored) and int(stored, 8) == sum(header[:148]) + 8 * 32 + sum(header[156:])


def test_checksum_is_exact_for_any_block():
    import random

    from loaders.formats.tar import _checksum_ok

    rng = random.Random(0)
    for _ in range(2000):
        header = bytearray(rng.choice((0, 255, rng.randrange(256))) for _ in range(BLOCK))
        total = sum(header[:148]) + 8 * 32 + sum(header[156:])
        for claimed in (total, total + 65521, total - 65521, total + 1):
            if claimed < 0:
                continue
            header[148:156] = b"%07o\0" % claimed if claimed < 8**7 else b"%08o" % claimed
            assert _checksum_ok(bytes(header)) == _reference_ok(bytes(header)) == (claimed == total)


def test_a_header_whose_checksum_is_off_by_the_adler_modulus_is_refused():
    from loaders.formats.tar import ShardFormatError

    data = bytearray(_tar([("000000.jpg", b"x" * 700)]))
    stored = int(bytes(data[148:156]).split(b"\0", 1)[0], 8)
    data[148:156] = b"%07o\0" % (stored + 65521)
    with pytest.raises(ShardFormatError, match="checksum"):
        list(iter_samples(io.BytesIO(bytes(data)), "mem://a.tar"))
