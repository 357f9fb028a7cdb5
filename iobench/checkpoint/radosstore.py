"""A store of striped RADOS objects (librados, no gateway): a part is the objects
``PREFIX/ID/NAME.00000``, ``.00001``, ... of ``stripe`` bytes each (RADOS refuses objects over
osd_max_object_size, 128 MiB by default), its length an xattr of its first object; the checkpoint's
``PREFIX/ID/.metadata`` object is written last and is its commit. RADOS has no rename: until the
metadata object exists the parts are an unfinished save that no reader opens, and abort removes them.
"""

from __future__ import annotations

import threading
from typing import Any

from iobench.ceph.connection import _errors, connect
from iobench.ceph.radosfs import DEFAULT_APP, enable_application

from .errors import CheckpointMissing
from .store import METADATA_NAME

STRIPE = 64 << 20
LENGTH_XATTR = "iobench.part_bytes"


class RadosPart:
    def __init__(self, ioctx: Any, name: str, stripe: int) -> None:
        self.ioctx, self.name, self.stripe = ioctx, name, stripe
        self.end = 0
        self.lock = threading.Lock()

    def _pieces(self, offset: int, length: int) -> list[tuple[str, int, int, int]]:
        """(object, offset in it, start in the request, length) of each object a request touches."""
        out, at = [], 0
        while at < length:
            index, inner = divmod(offset + at, self.stripe)
            n = min(self.stripe - inner, length - at)
            out.append((f"{self.name}.{index:05d}", inner, at, n))
            at += n
        return out

    def pwrite(self, data: memoryview, offset: int) -> int:
        for obj, inner, at, n in self._pieces(offset, len(data)):
            with _errors(f"writing {obj}"):
                self.ioctx.write(obj, bytes(data[at : at + n]), inner)
        with self.lock:
            self.end = max(self.end, offset + len(data))
        return len(data)

    def close(self) -> None:
        # every write above was acknowledged by the OSDs (librados' write is synchronous): durable
        head = f"{self.name}.00000"
        with _errors(f"writing {head}"):
            if self.end == 0:
                self.ioctx.write_full(head, b"")
            self.ioctx.set_xattr(head, LENGTH_XATTR, str(self.end).encode())


class RadosPartReader:
    def __init__(self, ioctx: Any, name: str, stripe: int) -> None:
        self.part = RadosPart(ioctx, name, stripe)
        try:
            with _errors(f"reading {name}"):
                self.size = int(ioctx.get_xattr(f"{name}.00000", LENGTH_XATTR).decode())
        except FileNotFoundError:
            raise CheckpointMissing(f"{name} is missing: the checkpoint's metadata names it") from None

    def preadinto(self, buf: memoryview, offset: int) -> int:
        got = 0
        for obj, inner, at, n in self.part._pieces(offset, min(len(buf), max(0, self.size - offset))):
            with _errors(f"reading {obj}"):
                data = self.part.ioctx.read(obj, n, inner)
            buf[at : at + len(data)] = data
            got += len(data)
            if len(data) < n:
                break
        return got

    def close(self) -> None:
        pass


class RadosStore:
    def __init__(self, pool: str, prefix: str, connection: dict[str, Any], *, stripe: int = STRIPE) -> None:
        self.pool, self.prefix, self.stripe = pool, prefix.strip("/"), stripe
        self.cluster = connect(**{k: v for k, v in connection.items() if v is not None})
        with _errors(f"opening pool {pool}", pool):
            if not self.cluster.pool_exists(pool):  # as a save makes its directory
                self.cluster.create_pool(pool)
                enable_application(self.cluster, pool, DEFAULT_APP)
            self.ioctx = self.cluster.open_ioctx(pool)
        self.where = f"RADOS pool {pool} ({self.prefix or '/'})"
        self.alignment = 1
        self.item_alignment = 4096

    def _key(self, checkpoint_id: str, name: str) -> str:
        return "/".join(p for p in (self.prefix, checkpoint_id, name) if p)

    def open_part(self, checkpoint_id: str, name: str) -> RadosPart:
        return RadosPart(self.ioctx, self._key(checkpoint_id, name), self.stripe)

    def commit(self, checkpoint_id: str, metadata: bytes) -> None:
        with _errors(f"writing {self._key(checkpoint_id, METADATA_NAME)}"):
            self.ioctx.write_full(self._key(checkpoint_id, METADATA_NAME), metadata)

    def abort(self, checkpoint_id: str) -> None:
        self.remove(checkpoint_id)

    def clear(self) -> None:
        """Every object under the prefix (a prefix of the caller's own)."""
        self.remove("")

    def remove(self, checkpoint_id: str) -> None:
        """Every object of the checkpoint, its metadata first (so it stops being loadable before
        its parts go)."""
        base = self._key(checkpoint_id, "")
        base = f"{base}/" if base else ""  # a checkpoint's objects, not another's that shares its start
        names = [o.key for o in self.ioctx.list_objects() if o.key.startswith(base)]
        meta = self._key(checkpoint_id, METADATA_NAME)
        for key in sorted(names, key=lambda k: k != meta):
            try:
                self.ioctx.remove_object(key)
            except Exception:
                continue

    def read_metadata(self, checkpoint_id: str) -> bytes:
        key = self._key(checkpoint_id, METADATA_NAME)
        try:
            with _errors(f"reading {key}"):
                size, _ = self.ioctx.stat(key)
                return self.ioctx.read(key, size, 0)
        except FileNotFoundError:
            raise CheckpointMissing(
                f"no committed checkpoint at rados://{self.pool}/{self._key(checkpoint_id, '')}"
            ) from None

    def open_reader(self, checkpoint_id: str, name: str) -> RadosPartReader:
        return RadosPartReader(self.ioctx, self._key(checkpoint_id, name), self.stripe)

    def locate(self, checkpoint_id: str, name: str) -> str:
        return f"rados://{self.pool}/{self._key(checkpoint_id, name)}"

    def local_files(self, checkpoint_id: str) -> list[str]:
        return []
