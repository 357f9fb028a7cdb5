"""s3dlio: a Rust client (the AWS SDK for Rust on its own tokio runtime) built for AI/ML reads,
one of the three object clients of MLPerf Storage v3.0.

s3dlio is configured once per process, from the environment, when its first S3 client is made:
this module sets its retries off (``S3DLIO_MAX_RETRY_ATTEMPTS=1``), its timeouts (connect, and a
whole request within the read timeout) and turns its own splitting of large GETs into concurrent
ranges off (``S3DLIO_ENABLE_RANGE_OPTIMIZATION=0``: one of the reader's ranged GETs is one request)
before that. A second tier in the same process with other timeouts gets the first one's (its
error messages say which). An endpoint is named in each URI (``s3://host:port/bucket/key``, which
s3dlio reads as that server); without one, s3dlio's global client (AWS). Credentials the usual way
for the AWS SDK: the environment (AWS_ACCESS_KEY_ID, ..., AWS_PROFILE), the shared files, the
instance's role; never passed in.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from loaders.observe.counters import FaultKind
from loaders.storage.clients.base import ClientSettings, ObjectClient, finals_raised, plain_etag, raise_final
from loaders.storage.clients.threadcpu import threads_named
from loaders.storage.faults import classify

_applied: dict[str, str] = {}  # the process's s3dlio settings, fixed by its first client
_lock = threading.Lock()
_HTTP_STATUS = re.compile(r"HTTP (\d{3})")
_MISSING = ("NoSuchKey", "NoSuchBucket", "NotFound", "HTTP 404", "not found", "does not exist")
_DENIED = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "HTTP 403", "Forbidden")


def _configure(settings: ClientSettings) -> Any:
    """s3dlio, imported once its process-wide settings are in the environment."""
    with _lock:
        if not _applied:
            _applied.update(
                S3DLIO_MAX_RETRY_ATTEMPTS="1",
                S3DLIO_CONNECT_TIMEOUT_SECS=f"{max(1, round(settings.connect_timeout_s))}",
                S3DLIO_OPERATION_TIMEOUT_SECS=f"{max(1, round(settings.read_timeout_s))}",
                S3DLIO_ENABLE_RANGE_OPTIMIZATION="0",
            )
            os.environ.update(_applied)
            if settings.region:
                os.environ.setdefault("AWS_DEFAULT_REGION", settings.region)
        import s3dlio

        return s3dlio


class S3dlioClient(ObjectClient):
    def __init__(self, settings: ClientSettings) -> None:
        super().__init__(settings)
        if settings.key or settings.profile:
            raise ValueError(
                "s3dlio reads its credentials from the environment only (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE=NAME): set them there, not in the tier or "
                "storage options"
            )
        host_port = settings.host_port  # None without an endpoint
        if host_port is not None and settings.secure and not host_port.endswith(":443"):
            raise ValueError(
                f"s3dlio: endpoint {settings.endpoint}: s3dlio names a server in its URIs and speaks "
                "TLS on port 443 only; use port 443, or another client"
            )
        self._s3dlio = _configure(settings)
        self._prefix = f"s3://{settings.host_port}/" if settings.endpoint else "s3://"

    # the base declares bounds_attempts a class constant; s3dlio's answer depends on the settings
    # its process's first client applied, so it is a property here
    @property
    def bounds_attempts(self) -> bool:  # type: ignore[override]  # a property over the base's ClassVar
        """Its timeouts bound an attempt within this reader's only if the process's first s3dlio
        client set them no longer than this one asks: else the reader bounds it (a helper thread)."""
        return int(_applied["S3DLIO_OPERATION_TIMEOUT_SECS"]) <= self.settings.read_timeout_s and int(
            _applied["S3DLIO_CONNECT_TIMEOUT_SECS"]
        ) <= max(1, self.settings.connect_timeout_s)

    @property
    def attempt_limits(self) -> str:
        return (
            f"connect timeout {_applied['S3DLIO_CONNECT_TIMEOUT_SECS']} s, whole request within "
            f"{_applied['S3DLIO_OPERATION_TIMEOUT_SECS']} s (s3dlio's settings of this process)"
        )

    def _uri(self, url: str) -> str:
        return self._prefix + url.split("://", 1)[1]

    def head(self, url: str) -> tuple[int, str | None]:
        with finals_raised(url, _raise_final, RuntimeError):
            meta = self._s3dlio.stat(self._uri(url))
        return int(meta["size"]), plain_etag(meta.get("etag"))

    def get(self, url: str, start: int, end: int) -> bytes | memoryview:
        if end <= start:
            return b""
        with finals_raised(url, _raise_final, RuntimeError):
            return memoryview(self._s3dlio.get_range(self._uri(url), start, end - start))  # no copy

    def classify(self, exc: BaseException) -> FaultKind | None:
        text = str(exc)
        if "SlowDown" in text or "ServiceUnavailable" in text or "InternalError" in text:
            return "throttled_or_5xx"
        status = _HTTP_STATUS.search(text)
        if status:
            return "throttled_or_5xx" if status.group(1).startswith("5") else None
        if "Connection refused" in text:  # before the timeouts: s3dlio calls a refusal a "connection timeout"
            return "connect_failed"
        if "tcp connect error" in text:
            return "connect_timeout"
        if "Connection reset" in text or "connection closed before message completed" in text:
            return "connection_reset"
        if "end of file before message length" in text or "error decoding response body" in text:
            return "truncated_body"
        if "timed out" in text:
            return "timeout"
        if "dispatch failure" in text:
            return "connect_failed"
        return classify(exc)

    def thread_ids(self) -> set[int]:
        return threads_named("s3dlio-rt")


def _raise_final(exc: RuntimeError, url: str) -> None:
    text = str(exc)
    if any(w in text for w in _MISSING):
        raise_final("missing", url, text.split(" — ", 1)[0], exc)
    if any(w in text for w in _DENIED):
        raise_final("denied", url, text.split(" — ", 1)[0], exc)
