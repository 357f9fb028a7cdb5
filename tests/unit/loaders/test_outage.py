"""A store that answered, then refuses connections for a while (a gateway restarting): its reads
are retried until the deadline and counted as an outage; one that never answered fails within the
attempt budget (narrow unit tests of the retry loop; a real radosgw killed and restarted under a
sweep: tests/reliability/test_gateway_restart.py)."""

from __future__ import annotations

import errno
import threading
import time

import pytest

from loaders.storage.objectstore import DeadlineExceeded, ObjectReader, ObjectStoreError


class RestartingFS:
    """An in-memory store that refuses connections for ``down_s`` from its call number ``down_from``
    on (1: it never answered before), then answers again."""

    def __init__(self, down_s: float, down_from: int = 2) -> None:
        self.down_s, self.down_from = down_s, down_from
        self.calls = 0
        self.down_at: float | None = None
        self.lock = threading.Lock()

    def cat_file(self, url, start=0, end=None):
        with self.lock:
            self.calls += 1
            if self.calls >= self.down_from and self.down_at is None:
                self.down_at = time.monotonic()
        if self.down_at is not None and time.monotonic() - self.down_at < self.down_s:
            raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
        return b"x" * (end - start)


def _reader(fs: RestartingFS, deadline_s: float | None = 10.0, **kw) -> ObjectReader:
    return ObjectReader(filesystem=fs, protocol="rados", deadline_s=deadline_s, **kw)


def test_a_store_that_answered_is_read_through_a_restart_longer_than_the_budget():
    # 2 s down: the attempt budget alone (6 attempts, at most 1.55 s of backoff) gave up within it
    fs = RestartingFS(down_s=2.0)
    reader = _reader(fs)
    assert reader.read_range("rados://p/a", 0, 10) == b"x" * 10
    t0 = time.monotonic()
    assert reader.read_range("rados://p/b", 0, 10) == b"x" * 10
    took = time.monotonic() - t0
    stats = reader.take_stats().counts
    assert 2.0 <= took < 2.0 + 1.0 + 0.2  # back within one capped backoff (1 s) of the store
    assert stats.failures == 0 and stats.refused_connections == fs.calls - 2 >= 4
    assert stats.faults == {"connect_failed": stats.refused_connections}
    assert stats.retries == stats.refused_connections  # each refusal one retry
    assert 2.0 <= stats.outage_s <= took + 0.01


def test_the_same_refusals_from_a_store_that_never_answered_fail_within_the_budget():
    fs = RestartingFS(down_s=2.0, down_from=1)
    reader = _reader(fs)
    t0 = time.monotonic()
    with pytest.raises(ObjectStoreError, match="gave up after 6 attempts") as info:
        reader.read_range("rados://p/a", 0, 10)
    assert not isinstance(info.value, DeadlineExceeded)
    assert time.monotonic() - t0 < 1.55 + 0.3 and fs.calls == 6  # 1.55 s: the most backoff can add
    stats = reader.take_stats().counts
    assert stats.refused_connections == 0 and stats.outage_s == 0 and stats.failures == 1


def test_an_endpoint_known_to_have_answered_is_ridden_through_from_the_first_request():
    """A DataLoader worker's first read: the process that built the spec read the manifest."""
    fs = RestartingFS(down_s=2.0, down_from=1)
    reader = _reader(fs, answered=("rados",))
    assert reader.read_range("rados://p/a", 0, 10) == b"x" * 10
    assert reader.take_stats().counts.refused_connections >= 4


def test_without_a_deadline_there_is_nothing_to_ride_through_to():
    fs = RestartingFS(down_s=2.0)
    reader = _reader(fs, deadline_s=None)
    reader.read_range("rados://p/a", 0, 10)
    with pytest.raises(ObjectStoreError, match="gave up after 6 attempts"):
        reader.read_range("rados://p/b", 0, 10)


def test_an_outage_longer_than_the_deadline_fails_at_it_saying_so():
    fs = RestartingFS(down_s=60.0)
    reader = _reader(fs, deadline_s=1.5)
    reader.read_range("rados://p/a", 0, 10)
    t0 = time.monotonic()
    with pytest.raises(ObjectStoreError) as info:
        reader.read_range("rados://p/b", 0, 10)
    took = time.monotonic() - t0
    assert took < 1.5 + 0.1 and not isinstance(info.value, DeadlineExceeded)
    assert info.value.errno == errno.ECONNREFUSED
    msg = str(info.value)
    assert "rados://p/b: the store answered earlier, then refused or reset connections until the 1.5 s" in msg
    assert "Connection refused" in msg
    stats = reader.take_stats().counts
    assert stats.failures == 1 and stats.refused_connections == fs.calls - 1
    assert 0.5 < stats.outage_s <= took + 0.01


def test_requests_held_up_together_count_their_common_seconds_once():
    fs = RestartingFS(down_s=1.0)
    reader = _reader(fs)
    reader.read_range("rados://p/a", 0, 10)
    threads = [threading.Thread(target=reader.read_range, args=(f"rados://p/{i}", 0, 10)) for i in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    stats = reader.take_stats().counts
    assert stats.failures == 0 and stats.refused_connections >= 4
    assert 1.0 <= stats.outage_s <= took + 0.01  # four requests held up for ~1 s: ~1 s, not ~4
