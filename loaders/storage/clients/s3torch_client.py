"""s3torchconnector's client (the AWS Common Runtime through Mountpoint's S3 client, the wheel
``s3torchconnectorclient``): requests run on the CRT's own event-loop threads.

Two things it cannot be made to do, said where they show:

- **Its own retries cannot be turned off.** ``max_attempts=1`` means the CRT's default (measured
  behind a fault-injecting proxy: 4 requests per failed read), so the client is built with 2: one
  retry of its own per failed request, which it does not report. A fault it passes on cost two
  requests (counted as one hidden retry, ``client_retries``); one its retry mended is not seen.
- **Its attempts have no read timeout**: an endpoint that accepts and never answers holds a GET for
  good (measured). The reader waits for each attempt on a helper thread and gives up at the deadline.

The CRT splits a GET into ``part_size`` parts of its own: the part size is the reader's, so one of
its ranged GETs is one request. Credentials the usual way for the CRT: the environment
(AWS_ACCESS_KEY_ID, ...), the profile (the tier's ``profile``, else AWS_PROFILE), the instance's role.
"""

from __future__ import annotations

from typing import ClassVar

from s3torchconnectorclient import S3Exception
from s3torchconnectorclient._mountpoint_s3_client import MountpointS3Client

from loaders.observe.counters import FaultKind
from loaders.storage.clients.base import (
    ClientSettings,
    ObjectClient,
    Write,
    finals_raised,
    plain_etag,
    raise_final,
    split_url,
)
from loaders.storage.clients.threadcpu import threads_named
from loaders.storage.faults import classify

MIN_PART_BYTES = 5 * 2**20  # the CRT's smallest part
_MISSING = ("key does not exist", "was not found", "NoSuchKey", "NoSuchBucket", "bucket does not exist")
_DENIED = ("Forbidden", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")


class S3TorchClient(ObjectClient):
    own_retries: ClassVar[str | None] = (
        "the CRT retries each failed request once by itself (max_attempts=2, the fewest it takes) and "
        "does not say so: a fault it passes on is counted with one hidden retry, one it mended is not seen"
    )
    hidden_retries_per_fault: ClassVar[int] = 1
    bounds_attempts: ClassVar[bool] = False

    def __init__(self, settings: ClientSettings) -> None:
        super().__init__(settings)
        if settings.key:
            raise ValueError(
                "s3torchconnector takes its credentials from the environment (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY) or a profile, not from storage options: set them there"
            )
        self.client = MountpointS3Client(
            settings.region or "us-east-1",
            part_size=max(MIN_PART_BYTES, settings.part_bytes),
            profile=settings.profile,
            endpoint=settings.endpoint,
            force_path_style=settings.path_style,
            max_attempts=2,
        )

    @property
    def attempt_limits(self) -> str:
        return "no read timeout of its own: each attempt waited for until the deadline"

    def head(self, url: str) -> tuple[int, str | None]:
        bucket, key = split_url(url)
        with finals_raised(url, _raise_final, S3Exception):
            info = self.client.head_object(bucket, key)
        return int(info.size), plain_etag(info.etag)

    def get_into(self, url: str, start: int, end: int, write: Write) -> int:
        if end <= start:
            return 0
        bucket, key = split_url(url)
        at = start
        with finals_raised(url, _raise_final, S3Exception):
            for piece in self.client.get_object(bucket, key, start, end):
                write(at, piece)
                at += len(piece)
        return at - start

    def classify(self, exc: BaseException) -> FaultKind | None:
        text = str(exc)
        if "Request throttled" in text:
            return "throttled_or_5xx"
        if "AWS_IO_SOCKET_TIMEOUT" in text:
            return "connect_timeout"
        if "AWS_IO_SOCKET_CLOSED" in text or "CONNECTION_CLOSED" in text:
            return "connection_reset"  # a reset and a body cut short read alike here
        # refused; or its resolver, which after refusals takes even an IP address for unresolvable
        # (AWS_IO_DNS_QUERY_FAILED, measured while radosgw restarted)
        if "CONNECTION_REFUSED" in text or "AWS_IO_DNS" in text or "AWS_IO_SOCKET" in text:
            return "connect_failed"
        return classify(exc)

    def thread_ids(self) -> set[int]:
        return threads_named("AwsEventLoop", "AwsHostResolver")


def _raise_final(exc: S3Exception, url: str) -> None:
    text = str(exc)
    if any(w in text for w in _MISSING):
        raise_final("missing", url, text, exc)
    if any(w in text for w in _DENIED):
        raise_final("denied", url, text, exc)
