"""The object clients by name (loaders/storage/clients/): the registry, the settings read from the
storage options, each client's reading of its own errors (the messages are the ones each raised
against a fault-injecting proxy and dead endpoints, recorded with the pinned versions), the CPU of
a client's own threads, and the reader's bounds on a client whose attempts have no read timeout.
The clients against the real radosgw: tests/integration/test_s3_clients.py."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time
import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iobench.analysis.evidence import ClientFacts, client_facts
from iobench.tiers import check_tier_spec
from loaders import make_loader
from loaders.observe import RequestCounts
from loaders.storage import (
    CLIENT_NAMES,
    CLIENTS,
    DEFAULT_CLIENT,
    ClientEntry,
    ClientName,
    SourceSpec,
    installed_clients,
    reads_before_fork,
    resolve_client,
    survives_fork,
)
from loaders.storage.clients import describe_client, threadcpu
from loaders.storage.clients.base import ClientSettings, ObjectClient, RangeSink, finals_raised, plain_etag
from loaders.storage.faults import DeadlineExceeded
from loaders.storage.objectstore import ObjectReader, RetryPolicy
from tests.helpers.shardkit import ALL_KEYS, make_shards, small_config

ALL = ("s3fs", "minio", "s3torchconnector", "obstore", "s3dlio")


def _measured_order() -> list[str]:
    ranked = [e for e in CLIENTS.known().values() if e.measured_rank is not None]
    return [e.name for e in sorted(ranked, key=lambda e: e.measured_rank)]


def test_the_registry_holds_every_client_and_all_are_installed_for_the_tests():
    assert CLIENT_NAMES == typing.get_args(ClientName) == ALL and list(CLIENTS.known()) == list(ALL)
    assert sorted(_measured_order()) == sorted(ALL) and _measured_order()[-1] == "s3fs"
    assert installed_clients() == list(ALL)  # the test extra installs them all
    for name in ALL:
        entry = CLIENTS.entry(name)
        assert issubclass(entry.load(), ObjectClient)
        described = describe_client(name)
        assert described["client"] == name and described["client_version"] == entry.version()
        assert entry.version()[0].isdigit()
    assert describe_client("s3torchconnector")["client_own_retries"].startswith("the CRT retries")
    assert describe_client("obstore")["client_own_retries"].startswith("none")
    with pytest.raises(TypeError, match=r"client 'plain' must be an ObjectClient subclass"):
        CLIENTS.register(ClientEntry("plain", object))


def test_auto_and_the_fork_facts_import_no_client():
    # in a fresh process: what auto weighs is the entries', asked of the import system
    code = (
        "import sys\n"
        "from loaders.storage import installed_clients, reads_before_fork, resolve_client\n"
        "resolve_client('auto'); [reads_before_fork(c) for c in installed_clients()]\n"
        f"print([m for m in {(*ALL, 's3torchconnectorclient')!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_client_states_what_it_is_once_its_entry_what_auto_weighs():
    # the facts auto weighs are the entry's, read without importing the client; the class says
    # only how it reads (its retries, its attempts' bounds)
    for name in ALL:
        cls = CLIENTS.entry(name).load()
        assert not {"name", "fork_safe", "takes_keys", "measured_rank"} & set(vars(cls))


def test_auto_is_the_best_measured_client_that_survives_a_fork_and_takes_what_is_given():
    assert [c for c in ALL if not survives_fork(c)] == ["obstore", "s3dlio"]  # tokio: see base.ForkGuard
    # a process that forks readers after its own reads makes those with a client that survives it
    assert [reads_before_fork(c) for c in ALL] == [c if survives_fork(c) else "s3fs" for c in ALL]
    assert reads_before_fork("obstore") == "s3fs" and reads_before_fork("minio") == "minio"
    safe = [c for c in _measured_order() if survives_fork(c)]
    assert resolve_client("auto") == safe[0]
    # credentials passed in: not the CRT, which finds its own
    assert resolve_client("auto", keys=True) == next(c for c in safe if c != "s3torchconnector")
    assert resolve_client("auto", profile=True) == safe[0]
    assert resolve_client(DEFAULT_CLIENT) in ALL and SourceSpec().client == DEFAULT_CLIENT


def test_an_unknown_client_is_refused_naming_the_allowed_ones():
    with pytest.raises(ValueError, match=r"client='boto': allowed values are auto, s3fs, minio"):
        resolve_client("boto")


def test_a_missing_client_says_how_to_install_it(monkeypatch):
    from loaders.storage import clients

    monkeypatch.setattr(clients, "installed_clients", lambda: ["s3fs"])
    with pytest.raises(
        ImportError, match=r"client='obstore' is not installed: pip install 'iobench\[s3clients\]'"
    ):
        resolve_client("obstore")
    assert resolve_client("auto") == "s3fs"


def test_settings_are_read_from_the_s3fs_storage_options():
    from iobench.tiers.s3 import s3_storage_options

    options = s3_storage_options("https://minio.example:9000", "eu-west-1", False, "lab", deadline_s=7)
    s = ClientSettings.from_storage_options(options, part_bytes=1 << 20, connections=8)
    assert (s.endpoint, s.region, s.path_style, s.profile) == (
        "https://minio.example:9000",
        "eu-west-1",
        False,
        "lab",
    )
    assert (s.connect_timeout_s, s.read_timeout_s, s.secure, s.host_port) == (
        5,
        7,
        True,
        "minio.example:9000",
    )
    other = ClientSettings.from_storage_options(options, "http://gw2:7480", part_bytes=1, connections=1)
    assert other.endpoint == "http://gw2:7480" and other.host_port == "gw2:7480" and not other.secure
    keyed = ClientSettings.from_storage_options({"key": "AK", "secret": "SK"}, part_bytes=1, connections=1)
    assert "SK" not in repr(keyed) and keyed.key == "AK"


@pytest.mark.parametrize(
    ("options", "given", "missing"),
    [
        ({"key": "AKIAHALFPAIR"}, "access key", "secret"),
        ({"client_kwargs": {"aws_secret_access_key": "SECRETHALF"}}, "secret", "access key"),
    ],
)
def test_half_a_key_pair_is_refused_before_any_request_without_its_value(options, given, missing):
    with pytest.raises(ValueError, match=f"an {given} without its {missing}") as refused:
        ClientSettings.from_storage_options(options, part_bytes=1, connections=1)
    assert "HALF" not in str(refused.value)


# (client, the error it raised, the kind) -- messages as each client wrote them
def _errors():
    import urllib3
    from minio.error import ServerError
    from s3torchconnectorclient import S3Exception

    return [
        ("minio", ServerError("server failed with HTTP status code 503", 503), "throttled_or_5xx"),
        (
            "minio",
            urllib3.exceptions.ProtocolError(
                "Connection aborted.", ConnectionResetError(104, "Connection reset by peer")
            ),
            "connection_reset",
        ),
        (
            "minio",
            urllib3.exceptions.ProtocolError(
                "Connection broken: IncompleteRead(524288 bytes read, 524288 more expected)"
            ),
            "truncated_body",
        ),
        (
            "minio",
            urllib3.exceptions.NewConnectionError(
                None, "Failed to establish a new connection: [Errno 111] Connection refused"
            ),
            "connect_failed",
        ),
        (
            "minio",
            urllib3.exceptions.ConnectTimeoutError(
                None, "Connection to 127.0.0.1 timed out. (connect timeout=2)"
            ),
            "connect_timeout",
        ),
        (
            "minio",
            urllib3.exceptions.ReadTimeoutError(None, "/", "Read timed out. (read timeout=3)"),
            "timeout",
        ),
        ("s3torchconnector", S3Exception("Client error: Request throttled"), "throttled_or_5xx"),
        (
            "s3torchconnector",
            S3Exception(
                "Client error: Unknown CRT error: CRT error 1047: aws-c-io: AWS_IO_SOCKET_CONNECTION_REFUSED, socket connection refused."
            ),
            "connect_failed",
        ),
        (
            "s3torchconnector",
            S3Exception(
                "Client error: Unknown CRT error: CRT error 1048: aws-c-io: AWS_IO_SOCKET_TIMEOUT, socket operation timed out."
            ),
            "connect_timeout",
        ),
        (
            "s3torchconnector",
            S3Exception(
                "Client error: Unknown CRT error: CRT error 1051: aws-c-io: AWS_IO_SOCKET_CLOSED, socket is closed."
            ),
            "connection_reset",
        ),
        (
            "s3torchconnector",
            S3Exception(
                "Client error: Unknown CRT error: CRT error 1058: aws-c-io: AWS_IO_DNS_QUERY_FAILED, A query to dns "
                "failed to resolve."
            ),
            "connect_failed",
        ),
        (
            "obstore",
            RuntimeError(
                "Generic S3 error: Error performing GET http://127.0.0.1:1/b/k in 345µs - Server returned "
                "non-2xx status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>"
            ),
            "throttled_or_5xx",
        ),
        (
            "obstore",
            RuntimeError(
                "Generic S3 error: Error performing GET http://127.0.0.1:1/b/k in 374µs - HTTP error: error "
                "sending request\n\nDebug source: ... hyper::Error( Io, Os { code: 104, kind: ConnectionReset, "
                'message: "Connection reset by peer", }, ), ...'
            ),
            "connection_reset",
        ),
        (
            "obstore",
            RuntimeError(
                "Generic S3 error: HTTP error: request or response body error\n\nDebug source: ... hyper::Error( "
                "Body, Custom { kind: UnexpectedEof, error: IncompleteBody, }, ), ..."
            ),
            "truncated_body",
        ),
        (
            "obstore",
            RuntimeError(
                "Generic S3 error: Error performing GET http://127.0.0.1:1/b/k in 396µs - HTTP error: error "
                'sending request ... HttpError { kind: Connect, ... ConnectError( "tcp connect error", '
                '127.0.0.1:1, Os { code: 111, kind: ConnectionRefused, message: "Connection refused", }, ...'
            ),
            "connect_failed",
        ),
        (
            "obstore",
            RuntimeError(
                "Generic S3 error: Error performing GET http://127.0.0.1:1/b/k in 2.0s - HTTP error: error "
                'sending request ... HttpError { kind: Timeout, ... ConnectError( "tcp connect error", '
                "127.0.0.1:1, Custom { kind: TimedOut, error: Elapsed( (), ), }, ..."
            ),
            "connect_timeout",
        ),
        (
            "obstore",
            RuntimeError(
                "Generic S3 error: Error performing GET ... in 3.0s - HTTP error: error sending request ... HttpError { kind: Timeout, source: reqwest::Error { kind: Request"
            ),
            "timeout",
        ),
        (
            "obstore",
            RuntimeError(
                "Generic S3 error: Error performing GET http://127.0.0.1:1/b/k in 9.7ms - HTTP error: error sending "
                "request ... HttpError { kind: Request, source: reqwest::Error { kind: Request, source: "
                "hyper_util::client::legacy::Error( SendRequest, hyper::Error( IncompleteMessage, ), ), }, }, ..."
            ),
            "connection_reset",
        ),
        (
            "s3dlio",
            RuntimeError(
                "S3 range GET failed for 's3://h:1/b/k': service error: SlowDown (Please reduce your request rate.)"
            ),
            "throttled_or_5xx",
        ),
        (
            "s3dlio",
            RuntimeError(
                "S3 HEAD failed for 's3://h:1/b/k': service error: unknown (no message) — HTTP 503 Service Unavailable"
            ),
            "throttled_or_5xx",
        ),
        (
            "s3dlio",
            RuntimeError(
                "S3 range GET failed for 's3://h:1/b/k': dispatch failure (I/O error: io error: error sending request "
                "for url (http://h:1/b/k?x-id=GetObject): client error (SendRequest): connection error: Connection "
                "reset by peer (os error 104)) — check AWS_ENDPOINT_URL, network connectivity"
            ),
            "connection_reset",
        ),
        (
            "s3dlio",
            RuntimeError(
                "Failed to read S3 range GET response body: read response body chunk: streaming error: error decoding "
                "response body: error reading a body from connection: end of file before message length reached"
            ),
            "truncated_body",
        ),
        (
            "s3dlio",
            RuntimeError(
                "GET range for s3://b/k failed: dispatch failure (connection timeout: timeout: error sending request for "
                "url (http://h:1/b/k?x-id=GetObject): client error (Connect): tcp connect error: Connection refused "
                "(os error 111)) — check AWS_ENDPOINT_URL — the server is not listening on that address/port"
            ),
            "connect_failed",
        ),
        (
            "s3dlio",
            RuntimeError(
                "GET range for s3://b/k failed: dispatch failure (connection timeout: timeout: error sending request for "
                "url (http://h:1/b/k?x-id=GetObject): client error (Connect): tcp connect error: deadline has elapsed)"
            ),
            "connect_timeout",
        ),
        (
            "s3dlio",
            RuntimeError(
                "GET range for s3://b/k failed: request timed out after 3s — check network connectivity"
            ),
            "timeout",
        ),
    ]


@pytest.mark.parametrize("case", range(len(_errors())))
def test_each_client_reads_its_own_errors_as_the_fault_kinds(case):
    name, exc, kind = _errors()[case]
    client = object.__new__(CLIENTS.entry(name).load())  # classify reads the error alone, no connection
    assert client.classify(exc) == kind
    words = {
        "connect_failed": "Could not connect",
        "timeout": "Read timeout",
        "connection_reset": "Connection reset",
    }
    if kind in words:  # the words the failed cell's hint looks for (iobench/tiers/faults.py)
        assert client.describe(exc).startswith(words[kind])


def test_a_missing_object_and_refused_access_are_oserrors_whatever_the_client():
    from s3torchconnectorclient import S3Exception

    from loaders.storage.clients import s3dlio_client, s3torch_client

    with pytest.raises(FileNotFoundError, match="no such bucket or object"):
        s3torch_client._raise_final(S3Exception("Service error: The key does not exist"), "s3://b/k")
    with pytest.raises(PermissionError, match="access denied"):
        s3torch_client._raise_final(S3Exception("Service error: Forbidden"), "s3://b/k")
    with pytest.raises(FileNotFoundError):
        s3dlio_client._raise_final(
            RuntimeError("S3 HEAD failed: service error: NotFound (no message)"), "s3://b/k"
        )
    s3dlio_client._raise_final(RuntimeError("service error: SlowDown"), "s3://b/k")  # not final: no raise

    with (
        pytest.raises(FileNotFoundError),
        finals_raised("s3://b/k", s3dlio_client._raise_final, RuntimeError),
    ):
        raise RuntimeError("S3 HEAD failed: service error: NotFound (no message)")
    with (
        pytest.raises(RuntimeError, match="SlowDown"),
        finals_raised("s3://b/k", s3dlio_client._raise_final, RuntimeError),
    ):
        raise RuntimeError("service error: SlowDown")  # not final: goes on as it came, for a retry
    with pytest.raises(ValueError), finals_raised("s3://b/k", s3dlio_client._raise_final, RuntimeError):
        raise ValueError("not the client's error: not judged")
    assert plain_etag('"abc"') == "abc" and plain_etag(None) is None and plain_etag('""') is None


@given(
    start=st.integers(0, 100),
    length=st.integers(1, 100),
    pieces=st.lists(st.integers(1, 60), max_size=8),
)
def test_a_streamed_body_is_written_only_within_its_range_and_all_of_it_counted(start, length, pieces):
    """A server that ignores the Range sends more than asked: none of it is written past the end,
    reading stops at the piece that runs past it, and the count says how much came."""
    end, body = start + length, bytes(range(256)) * 24
    writes: list[tuple[int, bytes]] = []
    sink, offered, stopped = RangeSink(start, end, lambda at, piece: writes.append((at, piece))), 0, False
    for size in pieces:
        piece = body[offered : offered + size]
        offered += size
        if not sink.take(piece):
            stopped = True
            break
    assert sink.received == offered
    assert stopped == (offered > length)
    assert b"".join(p for _, p in writes) == body[: min(offered, length)]
    assert all(at == start + sum(len(p) for _, p in writes[:n]) for n, (at, _) in enumerate(writes))
    assert all(at + len(piece) <= end for at, piece in writes)


def test_the_cpu_of_shared_threads_is_handed_out_once():
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.3)
        first = threadcpu.take({t.native_id})
        again = threadcpu.take({t.native_id})  # another reader's take right after: almost nothing
    finally:
        stop.set()
        t.join()
    assert first >= 0.1 and again < first / 2
    assert threadcpu.take({2**31 - 1}) == 0.0  # a thread that is gone counts nothing


class _Silent(ObjectClient):
    """A client whose attempts never end (no read timeout), and which writes into a download
    after its caller gave it up."""

    bounds_attempts = False

    def __init__(self, release: threading.Event) -> None:
        super().__init__(ClientSettings())
        self.release = release
        self.late_write: BaseException | None = None

    def head(self, url):
        return 8, None

    def get(self, url, start, end):
        self.release.wait()
        return b"x" * (end - start)

    def get_into(self, url, start, end, write):
        self.release.wait()
        try:
            write(start, b"late")
        except BaseException as exc:  # the gate shuts a given-up attempt out
            self.late_write = exc
            raise
        return 4


def _reader(client: ObjectClient, deadline_s: float) -> ObjectReader:
    reader = ObjectReader(filesystem=object(), deadline_s=deadline_s, policy=RetryPolicy(attempts=2))
    reader._clients, reader.client = [client], "silent"
    return reader


def test_an_attempt_without_a_read_timeout_fails_at_the_deadline():
    release = threading.Event()
    reader = _reader(_Silent(release), deadline_s=0.5)
    t0 = time.monotonic()
    try:
        with pytest.raises(
            DeadlineExceeded, match=r"no answer within the 0.5 s deadline.*silent gave no answer"
        ):
            reader.read_range("s3://b/k", 0, 8)
    finally:
        release.set()
    assert time.monotonic() - t0 < 0.5 + 0.3


def test_an_attempt_given_up_never_writes_into_the_download(tmp_path):
    release = threading.Event()
    client = _Silent(release)
    reader = _reader(client, deadline_s=0.3)
    path = tmp_path / "entry"
    with open(path, "wb") as out, pytest.raises(DeadlineExceeded):
        reader.download("s3://b/k", out, 8)
    release.set()
    for _ in range(100):  # the abandoned attempt wakes on its helper thread
        if client.late_write is not None:
            break
        time.sleep(0.01)
    assert "the download this body belongs to ended" in str(client.late_write) and path.read_bytes() == b""


def test_a_client_that_bounds_its_attempts_runs_on_the_calling_thread():
    callers = []

    class Quick(_Silent):
        bounds_attempts = True

        def get(self, url, start, end):
            callers.append(threading.get_ident())
            return b"y" * (end - start)

    reader = _reader(Quick(threading.Event()), deadline_s=1.0)
    assert reader.read_range("s3://b/k", 0, 3) == b"yyy"
    assert callers == [threading.get_ident()]
    assert reader.take_stats().counts.client_cpu_s >= 0.0


def test_read_view_keeps_the_clients_buffer_and_read_range_gives_bytes():
    class Viewing(_Silent):
        bounds_attempts = True

        def get(self, url, start, end):
            return memoryview(bytes(range(start, end)))

    reader = _reader(Viewing(threading.Event()), deadline_s=None)
    assert isinstance(reader.read_view("s3://b/k", 0, 4), memoryview)
    assert reader.read_range("s3://b/k", 1, 4) == bytes([1, 2, 3])
    assert reader.open_stream("s3://b/k", 200, 10, 20).read() == bytes(range(10, 20))
    out = io.BytesIO()
    reader.download("s3://b/k", out, 5)
    assert out.getvalue() == bytes(range(5))


def test_without_an_endpoint_the_environments_is_taken_as_botocore_takes_it(monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://env:1")
    assert ClientSettings.from_storage_options({}, part_bytes=1, connections=1).endpoint == "http://env:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://s3env:2")
    assert ClientSettings.from_storage_options({}, part_bytes=1, connections=1).endpoint == "http://s3env:2"


# A sixth object client, whole: the adapter (one file: 13 lines of code, the class 9 of them: a HEAD
# and a ranged GET) and its registry entry (ENTRY, its last line, found through one line of the
# iobench.clients entry-point group). Its objects are files under a root directory. A built-in
# client is the same class in loaders/storage/clients/ and the same entry in its _BUILTIN, its name
# added to ClientName (docs/architecture.md, Where things go).
SIXTH_ADAPTER = """\
import os

from loaders.storage import ClientEntry
from loaders.storage.clients.base import ObjectClient, split_url


class FileClient(ObjectClient):
    def path(self, url):
        return os.path.join(self.settings.storage_options["root"], *split_url(url))

    def head(self, url):
        return os.path.getsize(self.path(url)), None

    def get(self, url, start, end):
        with open(self.path(url), "rb") as f:
            f.seek(start)
            return f.read(end - start)


ENTRY = ClientEntry("sixth", FileClient, package="sixthclient", fork_safe=False)
"""
SIXTH_ENTRY_POINT = "[iobench.clients]\nsixth = sixth_client:ENTRY\n"


@pytest.fixture
def sixth_client(tmp_path, monkeypatch):
    """The sixth client installed as another package would be: a module and a distribution's
    metadata on sys.path, found by importlib.metadata as any entry point is."""
    monkeypatch.setattr(CLIENTS, "_registered", dict(CLIENTS._registered))  # what it registers: this test's
    (tmp_path / "sixth_client.py").write_text(SIXTH_ADAPTER)
    dist = tmp_path / "sixthclient-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sixthclient\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(SIXTH_ENTRY_POINT)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_sixth_client_is_one_adapter_and_one_registry_entry_and_reads_through_every_layer(sixth_client):
    assert "sixth" in installed_clients() and resolve_client("sixth") == "sixth"
    # what the entry states is what the layers do, the adapter saying none of it
    assert not survives_fork("sixth") and reads_before_fork("sixth") == "s3fs"
    assert resolve_client("auto") in ALL  # not measured: auto never picks it
    # the sweep file's check takes it where a tier names it
    check_tier_spec({"kind": "s3", "url": "s3://bucket/in1k", "client": "sixth"})
    shards = make_shards(sixth_client / "store" / "bucket" / "in1k")
    urls = [f"s3://bucket/in1k/{url.rsplit('/', 1)[1]}" for url in shards]
    source = SourceSpec(client="sixth", storage_options={"root": str(sixth_client / "store")}, deadline_s=5)
    loader = make_loader("threads", small_config(urls, workers=2, source=source))
    assert sorted(k for batch in loader for k in batch.keys) == ALL_KEYS
    assert (loader.stats.counters.requests or RequestCounts()).requests >= len(
        urls
    )  # the reader's requests, counted
    assert client_facts("sixth") == ClientFacts("sixth", "0.1", None)  # the verdict's, from its entry
