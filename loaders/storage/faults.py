"""What went wrong with a request to an object store: the errors a read fails with, and the fault
kinds a retry can mend, told from the errors botocore, s3fs, aiohttp and the other clients raise
(loaders/storage/clients/).

A kind is a :data:`~loaders.observe.counters.FaultKind` (``throttled_or_5xx``, ``truncated_body``,
``connection_reset``, ``connect_timeout``, ``timeout``, ``connect_failed``, ``io_error``); None when
retrying cannot help (a 403, a missing key, a bad argument).
"""

from __future__ import annotations

import errno

from loaders.observe.counters import FaultKind

RETRYABLE_CODES = {
    "SlowDown",
    "ServiceUnavailable",
    "InternalError",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "500",
    "502",
    "503",
    "504",
}
FATAL_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EINVAL}


class ObjectStoreError(OSError):
    """A request failed for good: names the URL, what happened, and the attempts made."""


class DeadlineExceeded(ObjectStoreError):
    """The storage gave no answer (or no progress) within the deadline: a timeout, not a refusal.

    Its message says which request, how many attempts in how long, and each attempt's own limits."""


# the words of each kind, put before a client's own message where its words would not say it
KIND_WORDS: dict[FaultKind, str] = {
    "throttled_or_5xx": "SlowDown or 5xx from the server",
    "truncated_body": "the body stopped short (IncompleteRead)",
    "connection_reset": "Connection reset",
    "connect_timeout": "Connect timeout",
    "timeout": "Read timeout",
    "connect_failed": "Could not connect (Connection refused or unreachable)",
    "io_error": "I/O error",
}


def exception_chain(exc: BaseException) -> list[BaseException]:
    """The exception, what it wraps (botocore keeps the transport error in ``kwargs["error"]``) and
    its causes: s3fs turns a ClientError into an OSError and aiohttp's errors hide behind botocore's."""
    out: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo and len(out) < 16:
        e = todo.pop(0)
        if e is None or any(e is seen for seen in out):
            continue
        out.append(e)
        inner = (getattr(e, "kwargs", None) or {}).get("error") if isinstance(e, Exception) else None
        todo += [inner if isinstance(inner, BaseException) else None, e.__cause__, e.__context__]
    return out


def describe_error(exc: BaseException | None) -> str:
    """The error and, when botocore's words hide it ("Could not connect"), the transport error."""
    if exc is None:
        return "none"
    inner = (getattr(exc, "kwargs", None) or {}).get("error")
    return f"{exc} ({type(inner).__name__}: {inner})" if isinstance(inner, BaseException) else str(exc)


def _s3_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = (response.get("Error") or {}).get("Code")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return str(code or status or "") or None


def classify(exc: BaseException) -> FaultKind | None:
    """The retryable fault kind of an exception, or None when retrying cannot help."""
    chain = exception_chain(exc)
    codes = [c for c in map(_s3_code, chain) if c]
    text = " ".join(f"{type(e).__name__} {e}" for e in chain)
    if any(c in RETRYABLE_CODES for c in codes) or any(
        c in text for c in ("SlowDown", "ServiceUnavailable", "reduce your request rate", "InternalError")
    ):
        return "throttled_or_5xx"
    if codes:  # the server answered, and not with something a retry can fix (403, 404, ...)
        return None
    # s3fs maps SlowDown/503/409 to EBUSY and 500 to EREMOTEIO, sometimes without the cause attached
    if isinstance(exc, OSError) and exc.errno in (errno.EBUSY, errno.EREMOTEIO):
        return "throttled_or_5xx"
    if isinstance(exc, (PermissionError, FileNotFoundError, IsADirectoryError)):
        return None
    if "IncompleteRead" in text or "ClientPayloadError" in text or "ResponseStreamingError" in text:
        return "truncated_body"
    if any(isinstance(e, ConnectionResetError) for e in chain) or any(
        c in text
        for c in ("Connection reset", "ServerDisconnected", "ConnectionClosed", "RemoteDisconnected")
    ):
        return "connection_reset"
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "connect_failed"  # before the timeouts: urllib3's refusal is a ConnectTimeoutError subclass
    if any("ConnectTimeout" in type(e).__name__ for e in chain) or "Connect timeout" in text:
        return "connect_timeout"  # no TCP connection at all: nothing is known to listen there
    if any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in chain):
        return "timeout"
    if isinstance(exc, ConnectionError) or any(
        c in text for c in ("EndpointConnectionError", "Could not connect", "Cannot connect")
    ):
        return "connect_failed"
    if isinstance(exc, OSError) and exc.errno in FATAL_ERRNOS:
        return None
    if isinstance(exc, OSError) and exc.errno in (errno.EIO, None):
        return "io_error"
    return None
