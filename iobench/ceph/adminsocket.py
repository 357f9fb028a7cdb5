"""A Ceph daemon's or client's admin socket (the protocol of `ceph daemon`): one command, its
JSON reply. Spoken directly rather than through the `ceph` CLI: no 0.3 s Python start-up per
call, and no need for the CLI on a client host that only mounts CephFS."""

from __future__ import annotations

import errno
import json
import socket
import struct
from typing import Any


def asok_command(path: str, prefix: str, *, timeout: float = 5.0, **args: Any) -> Any:
    """Run one admin-socket command (the protocol of `ceph daemon`); the parsed JSON reply.

    Spoken directly rather than through the `ceph` CLI: no 0.3 s Python start-up per call, and no
    need for the CLI to be installed on a client host that only mounts CephFS.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(json.dumps({"prefix": prefix, **args}).encode() + b"\0")
        (n,) = struct.unpack(">I", _recv(s, 4))
        raw = _recv(s, n).decode(errors="replace")
    if raw.startswith("ERROR:"):
        raise OSError(errno.EINVAL, f"admin socket {path}: `{prefix}`: {raw.strip()}")
    try:
        return json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return raw


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError(errno.ECONNRESET, "admin socket closed the connection mid-reply")
        buf += chunk
    return buf
