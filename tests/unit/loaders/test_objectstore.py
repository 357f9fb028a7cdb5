"""Retry policy and counters of the object reader (narrow unit tests of error paths; the
integration tests run against the lab's radosgw)."""

from __future__ import annotations

import io

import pytest

from loaders.storage.objectstore import ObjectReader, ObjectStoreError, RetryPolicy, classify

FAST = RetryPolicy(attempts=4, base_delay_s=0.001, max_delay_s=0.002)


class ClientError(Exception):
    """Shaped like botocore's: .response["Error"]["Code"]."""

    def __init__(self, code: str) -> None:
        super().__init__(f"An error occurred ({code})")
        self.response = {"Error": {"Code": code}}


class FlakyFS:
    """An in-memory object store whose GETs fail as scripted."""

    def __init__(self, data: bytes, failures: list[BaseException], short_reads: int = 0) -> None:
        self.data, self.failures, self.short_reads = data, list(failures), short_reads
        self.calls = 0

    def info(self, url):
        return {"size": len(self.data), "ETag": '"abc"'}

    def cat_file(self, url, start=0, end=None):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        chunk = self.data[start:end]
        if self.short_reads:
            self.short_reads -= 1
            return chunk[: len(chunk) // 2]
        return chunk


def _reader(fs, **kw):
    return ObjectReader(filesystem=fs, policy=FAST, part_bytes=1000, concurrency=3, **kw)


def test_throttling_and_resets_are_retried_and_counted():
    data = bytes(range(256)) * 20
    fs = FlakyFS(
        data, [ClientError("SlowDown"), ConnectionResetError("Connection reset by peer"), ClientError("503")]
    )
    reader = _reader(fs)
    out = io.BytesIO()
    assert reader.download("s3://b/k", out) == len(data)
    assert out.getvalue() == data
    stats = reader.take_stats().counts
    assert stats.retries == 3 and stats.failures == 0
    assert stats.faults == {"throttled_or_5xx": 2, "connection_reset": 1}
    assert stats.bytes_transferred == len(data)
    assert reader.take_stats().counts.requests == 0  # take_stats starts new counters


def test_a_short_body_is_completed_not_returned_torn():
    data = b"x" * 5000
    fs = FlakyFS(data, [], short_reads=2)
    reader = _reader(fs)
    assert reader.read_range("s3://b/k", 0, 5000) == data
    assert reader.take_stats().counts.faults == {"truncated_body": 2}


def test_a_ranged_stream_gets_only_its_bytes():
    # a part of a shard that several readers share: GETs of [start, end) alone, in part-sized pieces
    data = bytes(range(256)) * 20
    reader = _reader(FlakyFS(data, []))
    with reader.open_stream("s3://b/k", len(data), 1536, 4100) as stream:
        assert stream.read() == data[1536:4100]
    stats = reader.take_stats().counts
    assert (
        stats.bytes_transferred == 4100 - 1536 and stats.requests == 3
    )  # 1000-byte parts: 1536-2536-3536-4100


def test_beyond_the_retry_budget_fails_with_the_url_and_the_last_error():
    fs = FlakyFS(b"abc", [ClientError("SlowDown")] * 10)
    reader = _reader(fs)
    with pytest.raises(ObjectStoreError, match=r"GET s3://b/k: gave up after 4 attempts.*SlowDown"):
        reader.read_range("s3://b/k", 0, 3)
    stats = reader.take_stats().counts
    assert fs.calls == 4 and stats.retries == 3 and stats.failures == 1


@pytest.mark.parametrize("exc", [PermissionError("Access Denied"), FileNotFoundError("NoSuchKey")])
def test_errors_retrying_cannot_fix_fail_at_once(exc):
    fs = FlakyFS(b"abc", [exc])
    reader = _reader(fs)
    with pytest.raises(ObjectStoreError, match="s3://b/k"):
        reader.read_range("s3://b/k", 0, 3)
    assert fs.calls == 1 and reader.take_stats().counts.retries == 0


def test_classification():
    assert classify(ClientError("SlowDown")) == "throttled_or_5xx"
    assert classify(TimeoutError()) == "timeout"
    # botocore's, when no TCP connection came within connect_timeout (a host dropping SYNs)
    assert classify(type("ConnectTimeoutError", (Exception,), {})("Connect timeout on endpoint URL")) == (
        "connect_timeout"
    )
    assert classify(ConnectionRefusedError(111, "Connection refused")) == "connect_failed"
    assert classify(PermissionError()) is None
    assert classify(ValueError("bad")) is None
