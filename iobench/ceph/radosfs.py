"""``rados://POOL/KEY``: RADOS objects as an fsspec filesystem, straight through librados.

No gateway in the path (unlike s3:// through radosgw), so the same loaders can measure what
RADOS itself delivers. Registered as fsspec protocol "rados" (entry point
``fsspec.specs: rados = iobench.ceph.radosfs:RadosFileSystem``; ``register()`` does it by hand).

RADOS is flat: a pool holds keys, "/" in a key is just a character. Directories are emulated
from key prefixes, and listing walks the *whole* pool (``ioctx.list_objects()`` visits every
PG; there is no prefix index), which is fine for datasets of thousands of objects but O(pool).

Connections and the mapping of librados errors live in ``iobench.radosconn``.
"""

from __future__ import annotations

import contextlib
import errno
import time
from typing import Any

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from iobench.ceph.client import import_rados
from iobench.ceph.connection import SHARD_HINT, ObjectTooLargeError, _Conn, _conn, _errors, _user_name

__all__ = ["RadosFileSystem", "register", "split_path"]

DEFAULT_APP = "iobench"
# One OSD op may carry at most osd_max_write_size (90 MB default): bigger objects are written in
# pieces. Reads are chunked the same way so one huge read does not hold one huge buffer per op.
IO_CHUNK = 64 * 2**20
# The first read of an object of unknown size: covers typical shards (a few MB) in one op without
# allocating IO_CHUNK for every small object.
FIRST_READ = 8 * 2**20
DEFAULT_MAX_OBJECT = 128 * 2**20  # osd_max_object_size's default, used when the conf says nothing


def split_path(path: str) -> tuple[str, str]:
    """``rados://pool/a/b`` or ``pool/a/b`` -> ("pool", "a/b")."""
    path = path.split("://", 1)[-1].strip("/")
    pool, _, key = path.partition("/")
    return pool, key


class RadosFileSystem(AbstractFileSystem):
    """fsspec filesystem over librados. Paths are ``pool/key``; URLs ``rados://pool/key``."""

    protocol = "rados"
    root_marker = ""

    def __init__(
        self,
        conffile: str | None = None,
        name: str | None = None,
        user: str | None = None,
        keyring: str | None = None,
        connect_timeout: float = 15,
        op_timeout: float = 120,
        cluster: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.conffile = conffile  # None: librados' own search (iobench.ceph.connection)
        self.user = _user_name(name or user)
        self.keyring = keyring
        self.cluster_name = cluster
        self.connect_timeout = connect_timeout
        self.op_timeout = op_timeout

    # -- connection ------------------------------------------------------------------------
    def _c(self) -> _Conn:
        return _conn(
            self.conffile, self.user, self.keyring, self.connect_timeout, self.op_timeout, self.cluster_name
        )

    @property
    def cluster(self) -> Any:
        return self._c().cluster

    def ioctx(self, pool: str) -> Any:
        """The cached ioctx of ``pool`` (FileNotFoundError naming the pool when it is missing)."""
        if not pool:
            raise ValueError("a rados path needs a pool: rados://POOL/KEY")
        conn = self._c()
        io = conn.ioctxs.get(pool)
        if io is None:
            with conn.lock, _errors(f"rados://{pool}", pool=pool):
                io = conn.ioctxs.get(pool) or conn.cluster.open_ioctx(pool)
                conn.ioctxs[pool] = io
        return io

    def max_object_size(self) -> int:
        """osd_max_object_size as this client's config sees it (the OSDs normally share it)."""
        try:
            return int(self.cluster.conf_get("osd_max_object_size") or DEFAULT_MAX_OBJECT)
        except (ValueError, TypeError):
            return DEFAULT_MAX_OBJECT

    def check_size(self, path: str, size: int) -> None:
        limit = self.max_object_size()
        if size > limit:
            raise ObjectTooLargeError(
                errno.EFBIG,
                f"rados://{path}: {size / 2**20:.1f} MiB is larger than the cluster's osd_max_object_size "
                f"({limit / 2**20:.0f} MiB); RADOS cannot store it as one object: {SHARD_HINT}",
            )

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        return path.split("://", 1)[-1].strip("/")

    def unstrip_protocol(self, name: str) -> str:
        return f"rados://{name}"

    # -- metadata --------------------------------------------------------------------------
    def _keys(self, pool: str, prefix: str = "") -> list[str]:
        """Every key in ``pool`` starting with ``prefix``: one walk over the whole pool."""
        io = self.ioctx(pool)
        with _errors(f"listing rados://{pool}", pool=pool):
            return sorted(o.key for o in io.list_objects() if o.key.startswith(prefix))

    def _stat(self, pool: str, key: str) -> dict[str, Any]:
        io = self.ioctx(pool)
        with _errors(f"rados://{pool}/{key}"):
            size, mtime = io.stat(key)
        return {"name": f"{pool}/{key}", "size": size, "type": "file", "mtime": time.mktime(mtime)}

    def stat_object(self, path: str) -> dict[str, Any]:
        """``info`` of an object only: one op, no prefix listing when it is missing."""
        return self._stat(*split_path(path))

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        pool, key = split_path(path)
        if not pool:
            return {"name": "", "size": 0, "type": "directory"}
        if not key:
            self.ioctx(pool)  # raises "pool X does not exist"
            return {"name": pool, "size": 0, "type": "directory"}
        try:
            return self._stat(pool, key)
        except FileNotFoundError:
            pass
        # not an object: a "directory" when some key lives under it (costs a pool listing)
        if any(True for _ in self._keys(pool, key + "/")):
            return {"name": f"{pool}/{key}", "size": 0, "type": "directory"}
        raise FileNotFoundError(errno.ENOENT, f"rados://{pool}/{key}: no such object or prefix")

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        """Immediate children of a prefix; ``detail`` stats every object (one op each)."""
        pool, key = split_path(path)
        if not pool:
            with _errors("listing pools"):
                pools = sorted(self.cluster.list_pools())
            out = [{"name": p, "size": 0, "type": "directory"} for p in pools]
            return out if detail else pools
        prefix = f"{key}/" if key else ""
        keys = self._keys(pool, prefix)
        if not keys:
            if key:  # an object itself, or nothing at all
                entry = self.info(path)
                return [entry] if detail else [entry["name"]]
            return []
        files, dirs = [], set()
        for k in keys:
            rest = k[len(prefix) :]
            head, sep, _ = rest.partition("/")
            if sep:
                dirs.add(f"{pool}/{prefix}{head}")
            else:
                files.append(f"{pool}/{k}")
        if not detail:
            return sorted(dirs) + files
        return [{"name": d, "size": 0, "type": "directory"} for d in sorted(dirs)] + [
            self._stat(*split_path(f)) for f in files
        ]

    def find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs
    ) -> Any:
        """All objects under a prefix in one pool walk (the generic walk would list once per level)."""
        if maxdepth is not None or withdirs:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        pool, key = split_path(path)
        if not pool:
            return super().find(path, detail=detail, **kwargs)
        if key:
            with contextlib.suppress(FileNotFoundError):
                entry = self._stat(pool, key)  # a file finds itself
                return {entry["name"]: entry} if detail else [entry["name"]]
        names = [f"{pool}/{k}" for k in self._keys(pool, f"{key}/" if key else "")]
        if not detail:
            return names
        return {n: self._stat(*split_path(n)) for n in names}

    # -- data ------------------------------------------------------------------------------
    def read_range(self, pool: str, key: str, offset: int, length: int) -> bytes:
        io = self.ioctx(pool)
        parts = []
        with _errors(f"reading rados://{pool}/{key}"):
            while length > 0:
                data = io.read(key, min(length, IO_CHUNK), offset)
                parts.append(data)
                if len(data) < min(length, IO_CHUNK):
                    break  # end of object
                offset += len(data)
                length -= len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _read_to_end(self, pool: str, key: str, offset: int) -> bytes:
        # No stat first: a short read marks the end, so a whole small object costs one op, not
        # two (measured ~1.6x more small-object reads/s than stat + read on the lab).
        io = self.ioctx(pool)
        parts, step = [], FIRST_READ
        with _errors(f"reading rados://{pool}/{key}"):
            while True:
                data = io.read(key, step, offset)
                parts.append(data)
                if len(data) < step:
                    break
                offset += len(data)
                step = IO_CHUNK
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        pool, key = split_path(path)
        if not key:
            raise IsADirectoryError(errno.EISDIR, f"rados://{pool}: a pool, not an object")
        start = start or 0
        if start >= 0 and end is None:
            return self._read_to_end(pool, key, start)
        if start < 0 or end is None or end < 0:
            size = self._stat(pool, key)["size"]  # only needed for bounds relative to the end
            start = max(0, size + start) if start < 0 else start
            end = size if end is None else (max(0, size + end) if end < 0 else min(end, size))
        elif start == 0 and end == 0:
            return b""
        if end <= start:
            self._stat(pool, key)  # a missing object still raises, as other filesystems do
            return b""
        return self.read_range(pool, key, start, end - start)

    def write_object(self, path: str, data: bytes, xattrs: dict[str, bytes] | None = None) -> None:
        """Replace the object with ``data``, atomically when it fits in one op (<= IO_CHUNK).

        ``xattrs`` are set in the same op as the last piece, so an object whose xattr says
        "complete" really is. Larger objects go in IO_CHUNK pieces (osd_max_write_size).
        """
        pool, key = split_path(path)
        self.check_size(path, len(data))
        io = self.ioctx(pool)
        rados = import_rados()
        view = memoryview(data)
        with _errors(f"writing rados://{pool}/{key}"):
            if len(data) > IO_CHUNK:
                # stale xattrs survive write_full: drop them first so a torn upload cannot look whole
                for name in xattrs or {}:
                    with contextlib.suppress(rados.NoData, rados.ObjectNotFound):
                        io.rm_xattr(key, name)
                io.write_full(key, bytes(view[:IO_CHUNK]))
                last = ((len(data) - 1) // IO_CHUNK) * IO_CHUNK
                for off in range(IO_CHUNK, last, IO_CHUNK):
                    io.write(key, bytes(view[off : off + IO_CHUNK]), off)
                self._op(io, key, lambda op: op.write(bytes(view[last:]), last), xattrs)
            else:
                self._op(io, key, lambda op: op.write_full(bytes(view)), xattrs)

    @staticmethod
    def _op(io: Any, key: str, action: Any, xattrs: dict[str, bytes] | None) -> None:
        op = io.create_write_op()
        try:
            action(op)
            for name, value in (xattrs or {}).items():
                op.set_xattr(name, value)
            # mtime=0 would stamp the object 1970 (librados does not default it to "now" here)
            io.operate_write_op(op, key, mtime=int(time.time()))
        finally:
            io.release_write_op(op)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        self.write_object(self._strip_protocol(path), bytes(value))

    def rm_file(self, path: str) -> None:
        pool, key = split_path(path)
        io = self.ioctx(pool)
        with _errors(f"removing rados://{pool}/{key}"):
            io.remove_object(key)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None) -> None:
        paths = self.expand_path(path, recursive=recursive, maxdepth=maxdepth)
        for p in paths:
            # expand_path also yields emulated directories: nothing to remove for those
            with contextlib.suppress(FileNotFoundError):
                if split_path(p)[1]:
                    self.rm_file(p)

    def get_xattr(self, path: str, name: str) -> bytes | None:
        pool, key = split_path(path)
        rados = import_rados()
        io = self.ioctx(pool)
        with _errors(f"rados://{pool}/{key}"):
            try:
                return io.get_xattr(key, name)
            except rados.NoData:  # the object exists without that xattr
                return None

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        """``mkdir("pool")`` creates the pool (tagged with an application); prefixes need nothing."""
        pool, key = split_path(path)
        if not key or create_parents:
            self.ensure_pool(pool)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        # prefixes exist implicitly; only the pool has to be there for writes to succeed
        self.ensure_pool(split_path(path)[0])

    def ensure_pool(self, pool: str, app: str = DEFAULT_APP) -> bool:
        """Create ``pool`` when missing and tag it; True when it was created."""
        cluster = self.cluster
        with _errors(f"creating pool {pool!r}"):
            if cluster.pool_exists(pool):
                return False
            cluster.create_pool(pool)
        # untagged pools raise HEALTH_WARN POOL_APP_NOT_ENABLED
        enable_application(cluster, pool, app)
        return True

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: dict | None = None,
        **kwargs: Any,
    ) -> RadosFile:
        return RadosFile(
            self, path, mode, block_size=block_size or "default", cache_options=cache_options, **kwargs
        )


def enable_application(cluster: Any, pool: str, app: str) -> None:
    """Tag ``pool`` with ``app`` unless it already carries an application (changing one needs force)."""
    import json

    rados = import_rados()
    with contextlib.suppress(rados.Error):  # unreadable tags: try to enable and let that report
        if cluster.open_ioctx(pool).application_list():
            return
    cmd = {"prefix": "osd pool application enable", "pool": pool, "app": app}
    with _errors(f"tagging pool {pool!r} with application {app!r}"):
        ret, _, outs = cluster.mon_command(json.dumps(cmd), b"")
    if ret != 0:
        raise OSError(-ret, f"tagging pool {pool!r} with application {app!r}: {outs}")


class RadosFile(AbstractBufferedFile):
    """Buffered reads by range; writes buffered and stored with write_full on close.

    Writes keep the whole object in memory until close: objects are bounded by
    osd_max_object_size (128 MiB), and one write_full makes the new object appear at once.
    """

    DEFAULT_BLOCK_SIZE = 8 * 2**20

    def _fetch_range(self, start: int, end: int) -> bytes:
        pool, key = split_path(self.path)
        return self.fs.read_range(pool, key, start, end - start)

    def _initiate_upload(self) -> None:
        self._parts: list[bytes] = []
        self._written = 0

    def _upload_chunk(self, final: bool = False) -> bool:
        data = self.buffer.getvalue()
        self._written += len(data)
        self.fs.check_size(self.path, self._written)  # fail early, not after buffering 1 GB
        self._parts.append(data)
        if final:
            self.fs.write_object(self.path, b"".join(self._parts))
            self._parts = []
        return True


def register(clobber: bool = False) -> None:
    """Make "rados" known to fsspec (the package's entry point does this once installed)."""
    import fsspec

    if clobber or "rados" not in fsspec.available_protocols():
        fsspec.register_implementation("rados", RadosFileSystem, clobber=True)
