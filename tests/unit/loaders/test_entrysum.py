"""A cache entry's checksums at fill, and the check against them: any damage to the bytes is found
in the part it hit and in no other (properties over sizes and places), and the one pass at fill
gives the same MD5, sha256 and XXH3-64 as hashlib and xxhash alone."""

from __future__ import annotations

import hashlib
import os

from hypothesis import given, settings
from hypothesis import strategies as st
from xxhash import xxh3_64_intdigest

from loaders.storage.entrysum import PART_BYTES, EntrySum, damaged_parts, digests, read_sum, write_sum

SIZES = st.integers(min_value=0, max_value=3 * PART_BYTES + 1000)


def _summed(path: str) -> EntrySum:
    found = digests(path)
    return EntrySum(found.size, PART_BYTES, found.xxh3, "size", 1)


@settings(max_examples=12, deadline=None)
@given(size=SIZES, data=st.data())
def test_damage_is_found_in_the_part_it_hit_and_no_other(tmp_path_factory, size, data):
    path = str(tmp_path_factory.mktemp("e") / "entry")
    body = bytearray(os.urandom(size))
    with open(path, "wb") as f:
        f.write(body)
    summed = _summed(path)
    assert summed.size == size and len(summed.xxh3) == max(1, -(-size // PART_BYTES))
    assert damaged_parts(memoryview(bytes(body)), summed, summed.parts()) == []
    if not size:
        return
    at = data.draw(st.integers(0, size - 1))
    length = data.draw(st.integers(1, min(4096, size - at)))
    hurt = bytearray(body)
    hurt[at : at + length] = bytes(b ^ 0xFF for b in hurt[at : at + length])  # every byte changed
    found = damaged_parts(memoryview(bytes(hurt)), summed, summed.parts())
    assert found == sorted({at // PART_BYTES, (at + length - 1) // PART_BYTES})
    # a reader of a byte range checks only the parts it reads
    assert list(summed.parts(at, at + 1)) == [at // PART_BYTES]


def test_one_pass_gives_what_hashlib_and_zlib_give(tmp_path):
    body = os.urandom(PART_BYTES + 12345)
    path = tmp_path / "entry"
    path.write_bytes(body)
    found = digests(str(path), md5=True, sha256=True)
    assert found.md5 == hashlib.md5(body).hexdigest() and found.sha256 == hashlib.sha256(body).hexdigest()
    assert found.xxh3 == (xxh3_64_intdigest(body[:PART_BYTES]), xxh3_64_intdigest(body[PART_BYTES:]))


def test_a_sum_is_written_whole_and_a_bad_one_reads_as_none(tmp_path):
    summed = EntrySum(10, PART_BYTES, (1,), "sha256", 5)
    write_sum(str(tmp_path / "s"), summed)
    assert read_sum(str(tmp_path / "s")) == summed and os.listdir(tmp_path) == ["s"]
    (tmp_path / "bad").write_text("{not json")
    assert read_sum(str(tmp_path / "bad")) is None and read_sum(str(tmp_path / "missing")) is None
