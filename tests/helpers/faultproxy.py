"""A fault-injecting HTTP proxy for the tests: put it in front of the lab's radosgw and point S3
clients at ``proxy.endpoint``.

Each request is forwarded unchanged, or, at ``rate`` and drawn from a seeded generator, answered
with one of these faults (what storage does to a long run):

    slowdown   503 with the S3 XML error body ``<Code>SlowDown</Code>`` (what a throttling S3 says)
    reset      the connection is reset (RST) before any byte of a response
    truncate   the real response's status line and headers (its Content-Length included), then half
               of its body, then the connection is closed
    latency    the request is held ``latency_s`` before it is forwarded (a latency spike)

``counts`` says how many of each were injected, ``requests`` how many requests arrived. Only
requests whose method is in ``methods`` can be hit (GET and HEAD by default: the reads a loader
makes). The decisions come from ``random.Random(seed)`` in arrival order, so a run injects the same
number of faults when requests arrive in the same order. Bodies are only buffered, never
rewritten: the proxy does not know S3 and the signatures stay valid.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Sequence
from urllib.parse import urlsplit

KINDS = ("slowdown", "reset", "truncate", "latency")
_SLOWDOWN_XML = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    "<Message>Please reduce your request rate.</Message><Resource>{path}</Resource>"
    "<RequestId>faultproxy-{n}</RequestId></Error>"
)


class _Closed(Exception):
    """The peer closed its side between requests: the connection is done, no fault."""


def _read_head(f) -> bytes:
    """The start line and headers, up to and including the blank line."""
    lines = []
    while True:
        line = f.readline(65537)
        if not line:
            if lines:
                raise ConnectionError("connection closed inside a message head")
            raise _Closed
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            return b"".join(lines)


def _headers(head: bytes) -> dict[str, str]:
    out = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            out[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return out


def _read_exact(f, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ConnectionError(f"connection closed after {len(data)} of {n} body bytes")
    return data


def _read_chunked(f) -> bytes:
    """A chunked body, raw (sizes, chunks and trailers as they came)."""
    parts = []
    while True:
        line = f.readline(65537)
        if not line:
            raise ConnectionError("connection closed inside a chunked body")
        parts.append(line)
        size = int(line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while True:  # trailers, then the blank line
                trailer = f.readline(65537)
                parts.append(trailer)
                if trailer in (b"\r\n", b"\n", b""):
                    return b"".join(parts)
        parts.append(_read_exact(f, size + 2))


def _read_body(f, headers: dict[str, str], *, to_close: bool) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return _read_chunked(f)
    if "content-length" in headers:
        return _read_exact(f, int(headers["content-length"]))
    return f.read() if to_close else b""


def _reset(sock: socket.socket) -> None:
    """Close with RST rather than FIN: linger on, timeout 0."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class FaultProxy:
    """``with FaultProxy(upstream, rate=0.15, seed=1) as proxy: ... proxy.endpoint ... proxy.counts``."""

    def __init__(
        self,
        upstream: str,
        *,
        rate: float = 0.0,
        kinds: Sequence[str] = KINDS,
        seed: int = 0,
        latency_s: float = 0.2,
        methods: Sequence[str] = ("GET", "HEAD"),
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream {upstream!r}: expected http://host:port")
        self.upstream = (parts.hostname, parts.port)
        self.latency_s = latency_s
        self.methods = frozenset(methods)
        self.counts: Counter = Counter()
        self.requests = 0
        self._lock = threading.Lock()
        self.configure(rate=rate, kinds=kinds, seed=seed)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._open: set[socket.socket] = set()
        self._clients: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._stopped = False

    def configure(self, *, rate: float, kinds: Sequence[str] = KINDS, seed: int | None = None) -> None:
        """Change the fault rate (0..1) and kinds from now on; a ``seed`` restarts the draws."""
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or not kinds or not 0.0 <= rate <= 1.0:
            raise ValueError(f"rate={rate}, kinds={list(kinds)}: rate in [0, 1], kinds from {KINDS}")
        with self._lock:
            self.rate, self.kinds = rate, tuple(kinds)
            if seed is not None:
                self._rng = random.Random(seed)

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._spawn(self._accept_loop)

    def stop(self) -> None:
        """Close the listener and every connection, and wait for the proxy's threads to end."""
        self._stopped = True
        with self._lock:
            socks = [self._listener, *self._open]
        for sock in socks:
            # shutdown, not close alone: it wakes a thread blocked in accept() or recv() on the socket
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for t in list(self._threads):
            t.join(10)

    def open_connections(self) -> int:
        """Client connections open now (a client that closes what it opened brings this back to 0)."""
        with self._lock:
            return len(self._clients)

    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name="faultproxy")
        self._threads.append(t)
        t.start()

    def _track(self, sock: socket.socket, add: bool) -> None:
        with self._lock:
            (self._open.add if add else self._open.discard)(sock)

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed: stop() was called
            self._track(client, True)
            with self._lock:
                self._clients.add(client)
            self._spawn(self._serve, client)

    # ---- one client connection -------------------------------------------------------------

    def _draw(self, method: str) -> str | None:
        with self._lock:
            self.requests += 1
            if method not in self.methods or self._rng.random() >= self.rate:
                return None
            kind = self._rng.choice(self.kinds)
            self.counts[kind] += 1
            return kind

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        cfile = client.makefile("rb")
        ufile = None
        graceful = False
        try:
            while True:
                head = _read_head(cfile)
                headers = _headers(head)
                method, path = head.split(b" ", 2)[:2]
                method_s = method.decode("latin-1")
                if headers.get("expect", "").lower() == "100-continue":
                    # answer it here (botocore does not sign Expect) so the body is not held back
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = b"\r\n".join(
                        line for line in head.split(b"\r\n") if not line.lower().startswith(b"expect:")
                    )
                body = _read_body(cfile, headers, to_close=False)
                fault = self._draw(method_s)
                if fault == "reset":
                    return
                if fault == "slowdown":
                    self._send_slowdown(client, method_s, path.decode("latin-1"))
                    continue
                if fault == "latency":
                    time.sleep(self.latency_s)
                try:
                    upstream, ufile, rhead = self._forward(upstream, ufile, head + body)
                except (_Closed, OSError):
                    upstream, ufile = self._drop(upstream, ufile)
                    # the upstream closed an idle kept-alive connection: a fresh one, once
                    upstream, ufile, rhead = self._forward(upstream, ufile, head + body)
                rheaders = _headers(rhead)
                status = int(rhead.split(b" ", 2)[1])
                closing = rheaders.get("connection", "").lower() == "close"
                no_body = method_s == "HEAD" or status in (204, 304) or 100 <= status < 200
                rbody = b"" if no_body else _read_body(ufile, rheaders, to_close=True)
                if fault == "truncate" and rbody:
                    client.sendall(rhead + rbody[: len(rbody) // 2])
                    graceful = True  # FIN, not RST: the client reads the short body, then EOF
                    return
                if fault == "truncate":  # nothing to cut (HEAD, empty body): it was not injected
                    with self._lock:
                        self.counts["truncate"] -= 1
                client.sendall(rhead + rbody)
                if closing:
                    graceful = True
                    return
        except _Closed:
            graceful = True  # the client closed between requests
        except (OSError, ValueError, IndexError):
            return  # the client or the upstream went away, or sent something that is not HTTP
        finally:
            self._drop(upstream, ufile)
            self._track(client, False)
            with self._lock:
                self._clients.discard(client)
            cfile.close()
            if graceful:
                client.close()
            else:
                _reset(client)

    def _forward(self, upstream, ufile, request: bytes):
        """Send ``request`` upstream (connecting if need be); return the connection and the response head."""
        if upstream is None:
            upstream = socket.create_connection(self.upstream, timeout=120)
            self._track(upstream, True)
            ufile = upstream.makefile("rb")
        upstream.sendall(request)
        return upstream, ufile, _read_head(ufile)

    def _drop(self, upstream, ufile) -> tuple[None, None]:
        if ufile is not None:
            ufile.close()
        if upstream is not None:
            self._track(upstream, False)
            upstream.close()
        return None, None

    def _send_slowdown(self, client: socket.socket, method: str, path: str) -> None:
        body = _SLOWDOWN_XML.format(path=path, n=self.requests).encode()
        head = (
            "HTTP/1.1 503 Slow Down\r\n"
            "Content-Type: application/xml\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Retry-After: 0\r\n"
            "Connection: keep-alive\r\n\r\n"
        ).encode()
        client.sendall(head if method == "HEAD" else head + body)
