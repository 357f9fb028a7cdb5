"""What iobench asks of an object client, and what it tells one: the small protocol every client
of loaders/storage/clients/ meets, and the settings it is built from.

A client makes *one* attempt per call: no retries of its own where they can be turned off, so
that the reader (loaders/storage/objectstore.py) counts, backs off and bounds every retry alike
whatever the client. A client says what it cannot turn off (``own_retries``) and whether its own
timeouts bound an attempt (``bounds_attempts``; if not, the reader waits for it on a helper thread
and gives up at the deadline).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, NoReturn
from urllib.parse import urlsplit

from loaders.observe.counters import FaultKind
from loaders.storage.faults import KIND_WORDS, classify

Write = Callable[[int, Any], None]  # (offset in the object, a bytes-like piece)
STREAM_CHUNK = 2**20  # what a streamed body is handed on in
DEFAULT_TIMEOUT_S = 60.0  # botocore's, where the storage options set none


class RangeSink:
    """A streamed body of the range [start, end) handed on to ``write`` piece by piece, never past
    ``end``: a server that ignores the Range sends on into the next range's bytes, which are not
    this one's to write. ``received`` counts all that came, so the caller sees the overrun."""

    def __init__(self, start: int, end: int, write: Write) -> None:
        self.start, self.end, self.write, self.at = start, end, write, start

    def take(self, piece: Any) -> bool:
        """Hand on ``piece`` (what of it is in the range); False once the body ran past ``end``:
        read no more of it."""
        if self.at < self.end:
            self.write(self.at, piece[: self.end - self.at])
        self.at += len(piece)
        return self.at <= self.end

    @property
    def received(self) -> int:
        return self.at - self.start


@dataclass(frozen=True)
class ClientSettings:
    """Where and how a client connects, read from fsspec/s3fs storage options (the form the S3
    tier writes: loaders.storage.SourceSpec.storage_options), so one description serves every
    client. Credentials are not here unless given explicitly: each client finds them its own usual
    way (the environment, a profile)."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool = True
    profile: str | None = None
    key: str | None = field(default=None, repr=False)
    secret: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    connect_timeout_s: float = DEFAULT_TIMEOUT_S
    read_timeout_s: float = DEFAULT_TIMEOUT_S
    part_bytes: int = 8 * 2**20
    connections: int = 16  # the most requests one client has in flight (its connection pool)
    storage_options: Mapping = field(default_factory=dict, repr=False)  # as given (s3fs reads them)

    def __post_init__(self) -> None:
        # every client refuses half a key pair at its first request, each in its own words (obstore
        # with a TypeError about None): said here once, before any request, without either value
        if (self.key is None) != (self.secret is None):
            given, missing = ("access key", "secret") if self.secret is None else ("secret", "access key")
            raise ValueError(
                f"the storage options give an {given} without its {missing}: give both (key and "
                "secret, or client_kwargs' aws_access_key_id and aws_secret_access_key), or neither "
                "to take the credentials from the environment or a profile"
            )

    @classmethod
    def from_storage_options(
        cls, options: Mapping, endpoint: str | None = None, *, part_bytes: int, connections: int
    ) -> ClientSettings:
        client = options.get("client_kwargs") or {}
        config = options.get("config_kwargs") or {}
        style = (config.get("s3") or {}).get("addressing_style", "path")
        return cls(
            endpoint=endpoint or client.get("endpoint_url") or options.get("endpoint_url") or env_endpoint(),
            region=client.get("region_name")
            or os.environ.get("AWS_REGION")
            or os.environ.get("AWS_DEFAULT_REGION"),
            path_style=style == "path",
            profile=options.get("profile"),
            key=options.get("key") or client.get("aws_access_key_id"),
            secret=options.get("secret") or client.get("aws_secret_access_key"),
            token=options.get("token") or client.get("aws_session_token"),
            connect_timeout_s=float(config.get("connect_timeout", DEFAULT_TIMEOUT_S)),
            read_timeout_s=float(config.get("read_timeout", DEFAULT_TIMEOUT_S)),
            part_bytes=part_bytes,
            connections=connections,
            storage_options=options,
        )

    @property
    def secure(self) -> bool:
        return self.endpoint is None or self.endpoint.startswith("https://")

    @property
    def host_port(self) -> str | None:
        """``host:port`` of the endpoint, the port written out (the scheme's own when omitted)."""
        if not self.endpoint:
            return None
        parts = urlsplit(self.endpoint)
        return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def raise_final(what: Literal["missing", "denied"], url: str, detail: str, exc: BaseException) -> NoReturn:
    """A missing object or bucket, or refused access, raised as the OSError every client raises for
    it: the reader fails at once, saying so, whatever the client's own exception."""
    if what == "missing":
        raise FileNotFoundError(errno.ENOENT, f"no such bucket or object ({detail})", url) from exc
    raise PermissionError(errno.EACCES, f"access denied ({detail})", url) from exc


@contextmanager
def finals_raised(url: str, judge: Callable[[Any, str], None], *errors: type[Exception]) -> Iterator[None]:
    """One request of a client: an error of ``errors`` that ``judge`` finds final (it raises it
    with :func:`raise_final`) fails the read at once; any other goes on as it came, for the
    reader to classify and perhaps retry."""
    try:
        yield
    except errors as exc:
        judge(exc, url)
        raise


def plain_etag(etag: str | None) -> str | None:
    """An ETag as a HEAD gives it, without its quotes; None where the server gave none."""
    return (etag or "").strip('"') or None


class ForkGuard:
    """The process a client's process-wide runtime was started in, for a client whose runtime does
    not survive a fork (tokio's threads are not copied into the child: its requests there hang for
    good, measured with obstore and s3dlio). A client made in a process forked after that fails at
    once, saying what to do, instead of hanging the job."""

    def __init__(self, client: str, survivors: Sequence[str]) -> None:
        self.client, self.survivors = client, survivors  # survivors: the clients that survive a fork
        self.pid: int | None = None

    def check(self) -> None:
        pid = os.getpid()
        if self.pid is None:
            self.pid = pid
        elif self.pid != pid:
            raise RuntimeError(
                f"{self.client} was used in process {self.pid} before this process ({pid}) was forked "
                f"from it: {self.client}'s runtime does not survive a fork and its requests here would "
                "hang. Start the loader's workers with spawn or forkserver (torch: multiprocessing_context="
                f"'forkserver'), make the first {self.client} request in the workers, or use a client "
                f"that survives a fork ({', '.join(self.survivors)})"
            )


def env_endpoint() -> str | None:
    """Where botocore sends requests when no endpoint_url is given (AWS_ENDPOINT_URL and its S3 form)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")


def split_url(url: str) -> tuple[str, str]:
    """(bucket, key) of ``s3://bucket/key``."""
    path = url.split("://", 1)[1] if "://" in url else url
    bucket, _, key = path.partition("/")
    return bucket, key


class ObjectClient:
    """One client of one endpoint. Subclasses write ``head`` and ``get`` (or ``get_into``) and
    state what differs from the class facts below; ``classify`` and ``describe`` have defaults.
    What the client is called and what ``auto`` weighs of it are its registry entry's
    (``loaders.storage.clients.CLIENTS``)."""

    # None: the client makes one attempt per call; else what it retries by itself, which the
    # reader cannot see (said in the docs and the tier's description)
    own_retries: ClassVar[str | None] = None
    # retries the client made by itself that the reader knows of, per fault it passes on
    hidden_retries_per_fault: ClassVar[int] = 0
    # the client's own timeouts bound every attempt; if not, the reader bounds it (a helper thread)
    bounds_attempts: ClassVar[bool] = True

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.endpoint = settings.endpoint

    @property
    def attempt_limits(self) -> str:
        """Each attempt's own limits, as error messages name them."""
        s = self.settings
        return f"connect timeout {s.connect_timeout_s:g} s, read timeout {s.read_timeout_s:g} s"

    def head(self, url: str) -> tuple[int, str | None]:
        """(size, ETag without quotes) of the object: one HEAD."""
        raise NotImplementedError

    def get(self, url: str, start: int, end: int) -> bytes | memoryview:
        """Bytes [start, end) of the object (bytes, or a view of the client's own buffer): one
        ranged GET, whole in memory.
        A missing object or bucket raises FileNotFoundError, refused access PermissionError.
        A client writes ``get`` or ``get_into``, each the other's default: a client whose body
        comes in pieces writes get_into, and its get joins them."""
        parts: list[bytes | memoryview] = []
        self.get_into(url, start, end, lambda _, piece: parts.append(piece))
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def get_into(self, url: str, start: int, end: int, write: Write) -> int:
        """One ranged GET of [start, end), its pieces handed to ``write(offset, piece)`` as they
        come; the number of bytes that came (the caller sees a short or long body)."""
        data = self.get(url, start, end)
        write(start, data)
        return len(data)

    def classify(self, exc: BaseException) -> FaultKind | None:
        """The fault kind of an error this client raised (loaders/storage/faults.py), None when a
        retry cannot mend it."""
        return classify(exc)

    def describe(self, exc: BaseException) -> str:
        """The error in one line, its kind first in the words the hints look for."""
        kind = self.classify(exc)
        text = self.message(exc)
        return f"{KIND_WORDS[kind]}: {text}" if kind else text

    def message(self, exc: BaseException) -> str:
        """The client's own words for the error, one line."""
        lines = str(exc).strip().splitlines()
        return " ".join(lines[0].split())[:400] if lines else type(exc).__name__

    def thread_ids(self) -> set[int]:
        """Native ids of the threads the client does its I/O on beside the caller's (an event loop,
        a runtime): their CPU is the client's too (threadcpu.py)."""
        return set()

    def close(self) -> None:
        """Let go of connections; the client is not used again."""
