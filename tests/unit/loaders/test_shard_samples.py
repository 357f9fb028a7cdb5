"""The shard cursor: a reader's shards sample by sample, its state where the next sample begins, a
node reset to it reading from that byte on (nothing before it), and samples read again alone by
their spans (a resumed shuffle buffer's) - tar and Parquet, whole shards and parts of them."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iobench.datasets.wdsindex import write_wds_index
from loaders.formats import ShardFormatError
from loaders.pipeline.shard_samples import ShardSamples
from loaders.plan import Part
from loaders.storage import ShardSource, SourceSpec
from tests.helpers.shardkit import make_shards, make_uneven_shards, tiny_jpeg


class _Opens(ShardSource):
    """A local shard source that notes each open: (url, first byte, last byte asked)."""

    def __init__(self) -> None:
        super().__init__(SourceSpec())
        self.opens: list[tuple[str, int, int | None]] = []

    def open(self, url, start=0, end=None):  # type: ignore[override]
        self.opens.append((url, start, end))
        return super().open(url, start, end)


def _keys(samples) -> list[str]:
    return [s.key for s in samples]


@pytest.fixture(scope="module")
def tars(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("tars"), n_shards=3, per_shard=5)


@pytest.mark.parametrize("taken", [0, 1, 4, 5, 7, 14, 15])
def test_a_reset_cursor_opens_the_shard_where_its_next_sample_begins(tars, taken):
    whole = list(ShardSamples(tars, _Opens()))
    node = ShardSamples(tars, _Opens())
    for _ in range(taken):
        next(node)
    state = node.state_dict()
    source = _Opens()
    resumed = ShardSamples(tars, source)
    resumed.reset(state)
    rest = list(resumed)
    assert _keys(rest) == _keys(whole[taken:])
    assert all(a.parts == b.parts for a, b in zip(rest, whole[taken:], strict=True))
    if taken % 5:  # inside a shard: opened at the byte after the last sample taken, not before
        assert source.opens[0] == (tars[taken // 5], whole[taken - 1].span[1], None)
        # every byte from there to the end, and none before (a sample's span: its bytes in the shard)
        passed = sum(s.span[1] - s.span[0] for s in whole[:taken]) + 512 * (taken // 5)  # + end markers
        assert sum(s.read_bytes for s in rest) == sum(s.read_bytes for s in whole) - passed
    else:  # a shard's last sample taken: the next shard, from its start
        assert all(start == 0 for _, start, _ in source.opens)
    assert len(source.opens) == len(tars) - taken // 5


def test_samples_are_read_again_alone_by_their_spans(tars):
    source = _Opens()
    node = ShardSamples(tars, source)
    whole = list(node)
    wanted = [whole[i] for i in (3, 1, 2, 9, 12)]
    source.opens.clear()
    again = node.restore([s.ref for s in wanted])
    assert _keys(again) == _keys(wanted) and [s.parts for s in again] == [s.parts for s in wanted]
    # samples that follow one another in a shard come in one read of just their bytes
    assert source.opens == [
        (tars[0], whole[1].span[0], whole[3].span[1]),
        (tars[1], whole[9].span[0], whole[9].span[1]),
        (tars[2], whole[12].span[0], whole[12].span[1]),
    ]
    assert sum(s.read_bytes for s in again) == sum(s.span[1] - s.span[0] for s in again)


def test_a_shard_rewritten_since_its_spans_were_taken_is_an_error(tmp_path):
    urls = make_shards(tmp_path, n_shards=1, per_shard=4)
    node = ShardSamples(urls, ShardSource(SourceSpec()))
    refs = [s.ref for s in node]
    make_uneven_shards(tmp_path, [2])  # the same name, other samples
    with pytest.raises(ShardFormatError, match=r"train-000000\.tar"):
        node.restore(refs[2:])


def test_parts_resume_in_the_part_and_stop_at_its_end(tmp_path):
    urls = make_uneven_shards(tmp_path, [9, 6])
    for url in urls:
        write_wds_index(url)
    for ranged in (False, True):
        items = [Part(urls[0], 2, 7, ranged), Part(urls[1], 0, 4, ranged)]
        whole = list(ShardSamples(items, ShardSource(SourceSpec())))
        assert _keys(whole) == [f"{k:06d}" for k in [2, 3, 4, 5, 6, 9, 10, 11, 12]]
        node = ShardSamples(items, ShardSource(SourceSpec()))
        for _ in range(3):
            next(node)
        source = _Opens()
        resumed = ShardSamples(items, source)
        resumed.reset(node.state_dict())
        assert _keys(resumed) == _keys(whole[3:])
        # ranged: by byte range from the index, sample 5 on; else from the byte where sample 5 begins
        assert source.opens[0][:2] == (urls[0], whole[3].span[0])
        assert node.restore([whole[7].ref])[0].parts == whole[7].parts


def test_parquet_rows_resume_and_are_read_again_by_row(tmp_path):
    path = tmp_path / "train-000000.parquet"
    keys = [f"{i:06d}" for i in range(25)]
    table = pa.table({"key": keys, "jpg": [tiny_jpeg(i) for i in range(25)], "cls": list(range(25))})
    pq.write_table(table, path, row_group_size=10)
    items = [str(path)]
    whole = list(ShardSamples(items, ShardSource(SourceSpec())))
    assert _keys(whole) == keys and whole[-1].final
    node = ShardSamples(items, ShardSource(SourceSpec()))
    for _ in range(13):
        next(node)
    assert node.state_dict() == {"item": 0, "index": 13, "at": 13}  # a row's span: (row, row + 1)
    resumed = ShardSamples(items, ShardSource(SourceSpec()))
    resumed.reset(node.state_dict())
    rest = list(resumed)
    assert _keys(rest) == keys[13:]
    # only the row groups holding rows 13 on: not the first
    assert sum(s.read_bytes for s in rest) < sum(s.read_bytes for s in whole)
    again = node.restore([whole[i].ref for i in (20, 4)])
    assert _keys(again) == [keys[20], keys[4]] and again[0].parts == whole[20].parts
