"""librados connections and errors for iobench: one ``rados.Rados`` per (conffile, name,
keyring) per process, made lazily and remade after ``fork()`` (DataLoader workers fork;
librados' threads do not survive it), one ioctx per pool cached alongside, and librados
exceptions turned into the Python ones callers (and ObjectReader's retries) expect.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import math
import os
import threading
from collections.abc import Iterator
from typing import Any

from iobench.ceph.client import import_rados

SHARD_HINT = "write smaller shards (e.g. `iobench dataset synth --shard-size 64MB`)"


class CephConfigError(ValueError):
    """No configuration to reach a cluster: a setting to give, not a fault of the cluster."""


class ObjectTooLargeError(OSError):
    """An object is bigger than the cluster's osd_max_object_size."""


def _user_name(name: str | None) -> str:
    name = name or "client.admin"
    return name if "." in name else f"client.{name}"  # "admin" and "client.admin" both work


class _Conn:
    """A cluster handle and its per-pool ioctxs, valid in the process that made them."""

    def __init__(self, cluster: Any) -> None:
        self.pid = os.getpid()
        self.cluster = cluster
        self.ioctxs: dict[str, Any] = {}
        self.lock = threading.Lock()


_CONNS: dict[tuple, _Conn] = {}
_CONNS_LOCK = threading.Lock()


def connect(
    conffile: str | None = None,
    name: str | None = None,
    keyring: str | None = None,
    connect_timeout: float = 15,
    op_timeout: float = 120,
    cluster: str | None = None,
) -> Any:
    """The process's ``rados.Rados`` for these settings, connected (made on first use).

    The configuration is librados' own: ``conffile`` when given, else librados' search ($CEPH_CONF,
    /etc/ceph/$cluster.conf, ~/.ceph/$cluster.conf, ./$cluster.conf), then ``CEPH_ARGS``, then what is
    given here (``keyring``, the timeouts) on top; the cluster name (default ceph) picks the files,
    the keyring is the one the configuration names or librados' default for the user.

    ``op_timeout`` bounds every mon and OSD operation (rados_osd_op_timeout, rados_mon_op_timeout)
    so a dead cluster gives TimeoutError instead of a loader that hangs forever (librados' default
    is to wait indefinitely). ``connect_timeout`` bounds the connection to the mons
    (client_mount_timeout, default 300 s: the Python binding ignores ``connect(timeout=)``,
    measured: with the mon killed, connect(timeout=5) still waited past 100 s).
    """
    return _conn(conffile, name, keyring, connect_timeout, op_timeout, cluster).cluster


_CEPH_ARGS_FLAGS = {
    "--conf": "conf",
    "-c": "conf",
    "--cluster": "cluster",
    "--name": "name",
    "-n": "name",
    "--id": "id",
    "-i": "id",
    "--user": "id",
    "--keyring": "keyring",
    "-k": "keyring",
}


def ceph_args() -> dict[str, str]:
    """What ``CEPH_ARGS`` says of the configuration file, cluster, user and keyring, read as the
    ceph tools read them (they pick these out before librados starts; the rest goes to librados)."""
    import shlex

    out: dict[str, str] = {}
    words = shlex.split(os.environ.get("CEPH_ARGS", ""))
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in _CEPH_ARGS_FLAGS:
            if not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
            out[_CEPH_ARGS_FLAGS[flag]] = value
    if "id" in out and "name" not in out:
        out["name"] = f"client.{out['id']}"
    return out


def _conn(
    conffile: str | None,
    name: str | None,
    keyring: str | None,
    connect_timeout: float,
    op_timeout: float,
    cluster: str | None = None,
) -> _Conn:
    # what is given here, else CEPH_ARGS, else librados' own search (for the file) or defaults
    args = ceph_args()
    conffile, cluster = conffile or args.get("conf"), cluster or args.get("cluster")
    name, keyring = name or args.get("name"), keyring or args.get("keyring")
    # librados' search depends on the environment and the directory: part of the key
    env = (os.environ.get("CEPH_CONF"), os.environ.get("CEPH_ARGS"), os.getcwd())
    path = os.path.abspath(os.path.expanduser(conffile)) if conffile else None
    key = (path, env, cluster or "ceph", _user_name(name), keyring, connect_timeout, op_timeout)
    with _CONNS_LOCK:
        conn = _CONNS.get(key)
        if conn is not None and conn.pid == os.getpid():
            return conn
        # After fork the parent's handle is unusable here (its threads are gone) and shutting it
        # down could hang on locks held at fork time: drop it and connect afresh.
        rados = import_rados()
        if path is not None and not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, f"ceph config {conffile!r} not found")
        handle = rados.Rados(name=key[3], clustername=key[2])
        try:
            handle.conf_read_file(path)  # None: librados' own search
        except rados.Error:
            raise CephConfigError(
                f"no ceph config found for cluster {key[2]!r}: librados looked in $CEPH_CONF, "
                f"/etc/ceph/{key[2]}.conf, ~/.ceph/{key[2]}.conf and ./{key[2]}.conf; set CEPH_CONF or the "
                "tier's conffile (`source DIR/env` after `iobench lab up`)",
            ) from None
        handle.conf_parse_env()  # CEPH_ARGS, as the ceph tools honour it
        # whole seconds: these are "secs" options, and conf_set refuses "30.0" (EINVAL)
        conf = {
            "rados_osd_op_timeout": str(max(1, math.ceil(op_timeout))),
            "rados_mon_op_timeout": str(max(1, math.ceil(op_timeout))),
            "client_mount_timeout": str(max(1, math.ceil(connect_timeout))),
        }
        if keyring:
            conf["keyring"] = keyring
        where = conffile or "librados' default ceph.conf"
        with _errors(f"connecting to the mons of {where} as {key[3]} (within {connect_timeout:g} s)"):
            for option, value in conf.items():
                handle.conf_set(option, value)
            handle.connect(timeout=int(max(1, connect_timeout)))
        conn = _CONNS[key] = _Conn(handle)
        return conn


def shutdown_all() -> None:
    """Close this process's cluster connections (also run at exit).

    Left to the interpreter's teardown, librados can abort the process ("terminate called after
    throwing ... boost::bad_get") when the cluster went away first, as the test lab does.
    """
    with _CONNS_LOCK:
        conns = [c for c in _CONNS.values() if c.pid == os.getpid()]
        _CONNS.clear()
    for conn in conns:
        for io in conn.ioctxs.values():
            with contextlib.suppress(Exception):
                io.close()
        with contextlib.suppress(Exception):
            conn.cluster.shutdown()


atexit.register(shutdown_all)


@contextlib.contextmanager
def _errors(what: str, pool: str | None = None) -> Iterator[None]:
    """Turn librados exceptions into the Python ones callers (and ObjectReader's retries) expect."""
    rados = import_rados()
    try:
        yield
    except rados.Error as exc:
        code = getattr(exc, "errno", None)
        if isinstance(exc, rados.ObjectNotFound) or code == errno.ENOENT:
            if pool is not None and "opening pool" in str(exc):
                raise FileNotFoundError(errno.ENOENT, f"pool {pool!r} does not exist ({what})") from None
            raise FileNotFoundError(errno.ENOENT, f"{what}: no such object") from None
        if isinstance(exc, (rados.PermissionError, rados.PermissionDeniedError)) or code in (
            errno.EACCES,
            errno.EPERM,
        ):
            raise PermissionError(errno.EACCES, f"{what}: permission denied ({exc})") from None
        if isinstance(exc, (rados.TimedOut, rados.InterruptedOrTimeoutError)) or code == errno.ETIMEDOUT:
            raise TimeoutError(errno.ETIMEDOUT, f"{what}: timed out ({exc})") from None
        if code == errno.EFBIG:
            raise ObjectTooLargeError(
                errno.EFBIG, f"{what}: the OSD refused the object as too large ({exc}); {SHARD_HINT}"
            ) from None
        if code == errno.ENOSPC or isinstance(exc, rados.NoSpace):
            raise OSError(errno.ENOSPC, f"{what}: the cluster is full ({exc})") from None
        # EIO and friends: transient as far as a reader can tell, so ObjectReader may retry them
        raise OSError(code or errno.EIO, f"{what}: {exc}") from None
