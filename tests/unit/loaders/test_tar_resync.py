"""A tar reader that finds its place again: after damage of any kind anywhere (zeros, random bytes,
a shard cut short), every sample is either delivered or counted as lost, never both, never a short
sample; a sample is lost only where its bytes were damaged; the numbers after a gap are the index's;
a read of a part counts only its own samples; and without an index the reader still goes on."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders.formats.base import Extent, ReadOptions, ShardFormatError
from loaders.formats.tar_reader import TarReader
from loaders.formats.tar_writer import TarWriter
from loaders.storage import ShardSource, SourceSpec
from tests.helpers.faultkit import no_hang

N = 40


def _shard(directory: Path, seed: int) -> tuple[str, bytes, list[tuple[int, int]]]:
    """A shard of N samples (an image and a label each) with its index; its bytes; each sample's
    bytes [its first header, its last member's end)."""
    rng = random.Random(seed)
    path = directory / "train-000000.tar"
    with open(path, "wb") as f:
        writer = TarWriter(f)
        for i in range(N):
            writer.add(
                f"{i:06d}", [("jpg", rng.randbytes(rng.randint(100, 20_000))), ("cls", str(i).encode())]
            )
        for suffix, data in writer.close().items():
            path.with_suffix(suffix).write_bytes(data)
    spans = []
    with open(path, "rb") as f:
        for sample in TarReader().read(ShardSource(SourceSpec()), str(path)):
            spans.append((sample.offset, sample.span[1]))
        del f
    return str(path), path.read_bytes(), spans


DAMAGE = st.tuples(
    st.sampled_from(["zeros", "random", "truncated"]), st.floats(0, 0.95), st.integers(1, 60_000)
)


@settings(max_examples=60, deadline=None)
@given(damage=DAMAGE, index=st.booleans(), seed=st.integers(0, 3))
def test_every_sample_is_delivered_or_counted_lost_never_both(tmp_path_factory, damage, index, seed):
    directory = tmp_path_factory.mktemp("s")
    url, good, spans = _shard(directory, seed)
    how, where, length = damage
    at = int(where * len(good))
    bad = bytearray(good)
    if how == "truncated":
        bad = bad[:at]
        hurt = (at, len(good))
    else:
        end = min(len(good), at + length)
        bad[at:end] = bytes(end - at) if how == "zeros" else os.urandom(end - at)
        hurt = (at, end)
    Path(url).write_bytes(bytes(bad))
    if not index:
        Path(url).with_suffix(".idx").unlink()
    lost = []
    with no_hang():
        got = list(TarReader().read(ShardSource(SourceSpec()), url, options=ReadOptions(lost=lost.append)))
    for sample in got:  # never a short sample: each has both members, whole
        assert set(sample.parts) == {"jpg", "cls"} or spans_hit(spans, sample.key, hurt)
    if not index:
        return  # without the index the numbers after a gap are the reader's own count
    delivered = {s.index for s in got}
    counted = {n for loss in lost for n in range(loss.first, loss.first + loss.samples)}
    assert not delivered & counted
    assert delivered | counted == set(range(N)) or _only_data_hit(spans, hurt, delivered | counted)
    for n in counted:  # lost only where the bytes were damaged
        assert (spans[n][0] < hurt[1] and spans[n][1] > hurt[0]) or _after_a_cut(how, spans[n], at)
    for s in got:
        if not (spans[s.index][0] < hurt[1] and spans[s.index][1] > hurt[0]):
            assert s.parts["cls"] == str(s.index).encode()  # whole samples keep their own bytes


def spans_hit(spans, key: str, hurt) -> bool:
    begin, end = spans[int(key)]
    return begin < hurt[1] and end > hurt[0]


def _only_data_hit(spans, hurt, seen) -> bool:
    missing = set(range(N)) - seen
    return all(spans[n][0] < hurt[1] and spans[n][1] > hurt[0] for n in missing)


def _after_a_cut(how: str, span, at: int) -> bool:
    return how == "truncated" and span[1] > at


def test_a_part_counts_only_its_own_samples_and_fail_keeps_the_error(tmp_path):
    url, good, spans = _shard(tmp_path, 0)
    begin, end = spans[5][0], spans[7][1]
    bad = bytearray(good)
    bad[begin:end] = bytes(end - begin)  # samples 5, 6 and 7 zeroed
    Path(url).write_bytes(bytes(bad))
    source = ShardSource(SourceSpec())
    for start, stop, want in ((0, 20, [(5, 3)]), (10, 20, []), (6, 20, [(6, 2)])):
        lost = []
        got = [
            s.index for s in TarReader().read(source, url, Extent(start, stop), ReadOptions(lost=lost.append))
        ]
        assert [(x.first, x.samples) for x in lost] == want
        assert got == [n for n in range(start, stop) if not 5 <= n < 8]
    lost = []
    ranged = [
        s.index
        for s in TarReader().read(source, url, Extent(4, 12, ranged=True), ReadOptions(lost=lost.append))
    ]
    assert ranged == [4, 8, 9, 10, 11] and [(x.first, x.samples) for x in lost] == [(5, 3)]
    with pytest.raises(ShardFormatError, match=r"train-000000\.tar: .* at byte offset"):
        list(TarReader().read(source, url))


def test_a_parquet_row_group_that_cannot_be_read_is_skipped_and_its_rows_counted(tmp_path):
    """Parquet can go on where its footer is whole: the row groups after a damaged one are read."""
    import pyarrow.parquet as pq

    from loaders.formats.parquet import ParquetReader
    from loaders.formats.parquet_writer import ParquetWriter

    path = tmp_path / "train-000000.parquet"
    with open(path, "wb") as f:
        writer = ParquetWriter(f, row_group=10)
        for i in range(30):
            writer.add(f"{i:06d}", [("jpg", os.urandom(3000)), ("cls", str(i).encode())])
        writer.close()
    group = pq.ParquetFile(path).metadata.row_group(1)
    columns = [group.column(c) for c in range(group.num_columns)]
    begin = min(c.dictionary_page_offset or c.data_page_offset for c in columns)
    size = sum(c.total_compressed_size for c in columns)
    data = bytearray(path.read_bytes())
    data[begin : begin + size] = bytes(size)
    path.write_bytes(bytes(data))
    lost = []
    got = [
        s.index
        for s in ParquetReader().read(
            ShardSource(SourceSpec()), str(path), options=ReadOptions(lost=lost.append)
        )
    ]
    assert got == [*range(10), *range(20, 30)]
    assert [(x.first, x.samples) for x in lost] == [(10, 10)] and "row group 1" in lost[0].problem
    with pytest.raises(ShardFormatError, match="row group"):
        list(ParquetReader().read(ShardSource(SourceSpec()), str(path)))
