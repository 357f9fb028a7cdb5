"""Page-cache residency/evict/warm against the real kernel (Linux only)."""

from __future__ import annotations

import os
import sys

import pytest

from iobench.host import pagecache

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="mincore residency is Linux-only"
)

MIB = 1 << 20


@pytest.fixture
def big_file(tmp_path):
    path = tmp_path / "shard.bin"
    block = os.urandom(MIB)
    with open(path, "wb") as f:
        for _ in range(64):
            f.write(block)
        f.flush()
        # Dirty pages cannot be evicted; the tests are about clean ones.
        os.fsync(f.fileno())
    return path


def _read_range(path, start: int, length: int) -> None:
    with open(path, "rb", buffering=0) as f:
        # No readahead on this open file, so only the requested range becomes resident.
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        f.seek(start)
        while length > 0:
            chunk = f.read(min(length, 4 * MIB))
            if not chunk:
                break
            length -= len(chunk)


def test_evict_then_read_then_partial(big_file):
    res = pagecache.evict(big_file)
    assert res.total_bytes == 64 * MIB
    assert res.fraction <= 0.2

    res = pagecache.warm(big_file)
    assert res.fraction >= 0.95
    assert res.resident_bytes <= res.total_bytes

    pagecache.evict(big_file)
    _read_range(big_file, 0, 32 * MIB)
    half = pagecache.residency(big_file)
    assert abs(half.fraction - 0.5) <= 0.15

    again = pagecache.evict(big_file)
    assert again.fraction <= 0.2
    assert pagecache.residency(big_file).fraction == pytest.approx(again.fraction, abs=0.05)


def test_dirty_file_is_evicted_after_fdatasync(tmp_path):
    path = tmp_path / "dirty.bin"
    path.write_bytes(os.urandom(8 * MIB))  # no fsync: pages are dirty
    assert pagecache.residency(path).fraction >= 0.95
    assert pagecache.evict(path).fraction <= 0.2


def test_per_file_and_totals(tmp_path, big_file):
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 10_000)  # not a multiple of the page size
    pagecache.evict(big_file)
    res = pagecache.warm([small])
    assert res.resident_bytes == 10_000  # partial last page counted to EOF, not page end
    both = pagecache.residency([big_file, small], per_file=True)
    assert both.total_bytes == 64 * MIB + 10_000
    assert [f.path for f in both.files] == [str(big_file), str(small)]
    assert both.files[1].fraction == 1.0
    assert both.resident_bytes == sum(f.resident_bytes for f in both.files)
    assert pagecache.residency([big_file]).files is None


def test_empty_file_and_empty_list(tmp_path):
    empty = tmp_path / "empty.bin"
    empty.touch()
    res = pagecache.residency(empty)
    assert (res.resident_bytes, res.total_bytes, res.fraction) == (0, 0, 0.0)
    assert pagecache.evict(empty).total_bytes == 0
    assert pagecache.residency([]).total_bytes == 0


def test_file_larger_than_a_window(tmp_path):
    # A sparse 3 GiB file crosses the 2 GiB and the 1 GiB-window boundaries without
    # using disk; reading from a hole still puts (zero) pages in the page cache.
    path = tmp_path / "sparse.bin"
    size = 3 << 30
    with open(path, "wb") as f:
        f.truncate(size)
    pagecache.evict(path)
    start = (5 << 29) - 4 * MIB  # straddles the window boundary at 2.5 GiB - 4 MiB
    _read_range(path, start, 8 * MIB)
    res = pagecache.residency(path)
    assert res.total_bytes == size
    assert 8 * MIB <= res.resident_bytes <= 16 * MIB
    assert pagecache.evict(path).resident_bytes <= MIB


def test_missing_path_names_it(tmp_path):
    missing = tmp_path / "nope" / "shard-000.tar"
    for fn in (pagecache.residency, pagecache.evict, pagecache.warm):
        with pytest.raises(FileNotFoundError, match=r"shard-000\.tar") as info:
            fn([missing])
        assert str(missing) in str(info.value)
        assert "upload the dataset" in str(info.value)


def test_directory_is_rejected(tmp_path):
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        pagecache.residency(tmp_path)


def test_drop_all_caches_without_root(monkeypatch):
    # Not run for real: it would drop every process's page cache on the host.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert pagecache.drop_all_caches() is False


def test_non_linux_says_residency_is_unknown(monkeypatch, big_file):
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(pagecache.PageCacheUnsupported, match=r"cannot be measured"):
        pagecache.residency(big_file)
    with pytest.raises(NotImplementedError):
        pagecache.evict(big_file)
