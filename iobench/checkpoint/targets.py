"""A checkpoint destination made real: the writer and reader that save to it and restore from it,
how a restore is made cold there, and how a failed or old checkpoint is removed.

File tiers (local, CephFS) and RADOS are written by iobench's own writer over a store (store.py);
object stores through their clients' own DCP paths: s3torchconnector's S3StorageWriter and
S3StorageReader, and torch's FsspecWriter and FsspecReader over s3fs. Those write one stream per
file; their request latency here is per file (open to close), iobench's per request.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from typing import Any, Protocol, TypeVar

from torch.distributed.checkpoint.storage import StorageReader, StorageWriter

from iobench.host.pagecache import drop_all_caches, evict
from iobench.results.checkpoint import CheckpointDestination
from iobench.tiers import make_tier
from iobench.tiers.base import Tier

from .errors import CheckpointError
from .localstore import LocalStore
from .reader import DcpStoreReader
from .store import IoLog, Store
from .writer import DEFAULT_IO, DcpStoreWriter, IoOptions

_TierT = TypeVar("_TierT", bound=Tier)


class Target(Protocol):
    where: str  # the tier in words
    writer_name: str  # the writer in words
    local: bool  # its files are on this host's file systems (the page cache, block devices count)

    def writer(self) -> StorageWriter: ...

    def reader(self) -> StorageReader: ...

    def checkpoint_id(self, name: str) -> str:
        """What DCP is given as the checkpoint id of checkpoint ``name``."""

    def requests(self, io: StorageWriter | StorageReader) -> IoLog: ...

    def make_cold(self, checkpoint_id: str) -> str:
        """Drop this host's cached copy of the checkpoint; returns how, in words."""

    def remove(self, checkpoint_id: str) -> None: ...

    def abort(self, checkpoint_id: str) -> None:
        """Remove what a failed save left (never a committed checkpoint)."""

    def clear(self) -> None:
        """Remove every checkpoint at the destination: one a cell owns, before it starts."""


def cold_local(files: list[str]) -> str:
    """The files out of the page cache: every clean page of the host as root (MLPerf Storage drops
    caches between write and read), else the files' own pages (posix_fadvise DONTNEED)."""
    if drop_all_caches():
        return "drop_caches"
    if files:
        evict(files)
    return "posix_fadvise(DONTNEED)"


class StoreTarget:
    """iobench's writer and reader over a store."""

    def __init__(self, store: Store, options: IoOptions, label: str) -> None:
        self.store, self.options = store, options
        self.where, self.writer_name = store.where, label
        self.local = isinstance(store, LocalStore)

    def writer(self) -> DcpStoreWriter:
        return DcpStoreWriter(self.store, self.options)

    def checkpoint_id(self, name: str) -> str:
        return name

    def reader(self) -> DcpStoreReader:
        return DcpStoreReader(self.store, self.options)

    def requests(self, io: StorageWriter | StorageReader) -> IoLog:
        # the writers and readers DCP is given here are the ones writer() and reader() made
        assert isinstance(io, (DcpStoreWriter, DcpStoreReader)), type(io)
        return io.totals.log

    def make_cold(self, checkpoint_id: str) -> str:
        if not self.local:
            return "none on this host (the client keeps no cache; the servers' caches are the cluster's)"
        return cold_local(self.store.local_files(checkpoint_id))

    def remove(self, checkpoint_id: str) -> None:
        self.store.remove(checkpoint_id)

    def abort(self, checkpoint_id: str) -> None:
        self.store.abort(checkpoint_id)

    def clear(self) -> None:
        self.store.clear()


class StreamTarget:
    """A writer and reader of the DCP FileSystemWriter family (one stream per file), each file's
    open-to-close timed through the writer's own file system."""

    def __init__(
        self,
        where: str,
        label: str,
        make_writer,
        make_reader,
        root: str,
        local: bool,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.where, self.writer_name, self.local = where, label, local
        self.storage_options = storage_options or {}  # fsspec's, to reach the root (may hold credentials)
        self._make_writer, self._make_reader, self.root = make_writer, make_reader, root.rstrip("/")
        self._logs: dict[int, IoLog] = {}

    def _timed(self, io: Any) -> Any:
        log = self._logs[id(io)] = IoLog()
        opened = io.fs.create_stream

        @contextlib.contextmanager
        def create_stream(path, mode):
            t0 = time.perf_counter()
            with opened(path, mode) as stream:
                counted = _Counted(stream)
                yield counted
            log.add(time.perf_counter() - t0, counted.n)

        io.fs.create_stream = create_stream
        return io

    def writer(self) -> StorageWriter:
        return self._timed(self._make_writer(self.root))

    def checkpoint_id(self, name: str) -> str:
        return f"{self.root}/{name}"

    def reader(self) -> StorageReader:
        return self._timed(self._make_reader(self.root))

    def requests(self, io: StorageWriter | StorageReader) -> IoLog:
        return self._logs.get(id(io), IoLog())

    def make_cold(self, checkpoint_id: str) -> str:
        if not self.local:
            return "none on this host (the client keeps no cache between restores; the server's are its own)"
        path = checkpoint_id
        return cold_local([os.path.join(path, f) for f in os.listdir(path)] if os.path.isdir(path) else [])

    def remove(self, checkpoint_id: str) -> None:
        self._fs().rm(checkpoint_id, recursive=True)

    def abort(self, checkpoint_id: str) -> None:
        """The failed checkpoint's files removed and, on S3, its unfinished multipart uploads aborted
        (their parts are stored, and billed, until then)."""
        with contextlib.suppress(FileNotFoundError):
            self.remove(checkpoint_id)
        if checkpoint_id.startswith("s3://"):
            fs = self._fs()
            bucket, _, prefix = checkpoint_id[len("s3://") :].partition("/")
            listed = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix)
            for upload in listed.get("Uploads", []):
                fs.call_s3(
                    "abort_multipart_upload", Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                )

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs().rm(self.root, recursive=True)

    def _fs(self):
        import fsspec

        return fsspec.core.url_to_fs(self.root, **self.storage_options)[0]


class _Counted:
    """A stream that counts the bytes written through it or read from it."""

    def __init__(self, stream: Any) -> None:
        self._stream, self.n = stream, 0

    def write(self, b) -> int:
        n = self._stream.write(b)
        self.n += n if isinstance(n, int) else len(b)
        return n

    def read(self, *args) -> bytes:
        data = self._stream.read(*args)
        self.n += len(data)
        return data

    def readinto(self, b) -> int:
        n = self._stream.readinto(b)
        self.n += n or 0
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def make_target(dest: CheckpointDestination, options: IoOptions = DEFAULT_IO) -> Target:
    """The destination's writer and reader, on its tier's connection."""
    kind = dest.tier.get("kind")
    maker = _MAKERS.get((kind, dest.writer)) if kind is not None else None  # no kind: no path
    if maker is None:
        allowed = ", ".join(f"{w} on {k}" for k, w in _MAKERS)
        raise CheckpointError(
            f"checkpoints to a {kind} tier with writer {dest.writer}: no such path; allowed: {allowed}"
        )
    return maker(dest, options)


def _tier_of(dest: CheckpointDestination, cls: type[_TierT]) -> _TierT:
    """The destination's tier, built from its mapping: ``cls``, which its kind names."""
    tier = make_tier({**dest.tier, "url": dest.location})
    if not isinstance(tier, cls):
        raise CheckpointError(
            f"checkpoints to a {dest.tier.get('kind')} tier: its kind is registered as "
            f"{type(tier).__name__}, and this path writes through {cls.__name__}; register a "
            f"subclass of {cls.__name__} under that kind, or write the checkpoints to another tier"
        )
    return tier


def _local(dest: CheckpointDestination, options: IoOptions) -> Target:
    root = os.path.expanduser(dest.location)
    os.makedirs(root, exist_ok=True)
    name = "CephFS" if dest.tier.get("kind") == "cephfs" else "local disk"
    store = LocalStore(root, direct=dest.io == "direct", name=name)
    return StoreTarget(
        store, options, "iobench" + (" (O_DIRECT)" if dest.io == "direct" else " (buffered, fsync)")
    )


def _stock(dest: CheckpointDestination, options: IoOptions) -> Target:
    from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter

    root = os.path.expanduser(dest.location)
    os.makedirs(root, exist_ok=True)
    return StreamTarget(
        f"local disk {root}",
        "torch FileSystemWriter (2 threads, fsync)",
        lambda root: FileSystemWriter(root, sync_files=True, thread_count=2),
        FileSystemReader,
        root,
        local=True,
    )


def _rados(dest: CheckpointDestination, options: IoOptions) -> Target:
    from iobench.tiers.rados import RadosTier

    from .radosstore import RadosStore

    tier = _tier_of(dest, RadosTier)
    store = RadosStore(tier.pool, tier.prefix, tier.connection())
    return StoreTarget(store, options, "iobench (librados)")


def _s3_iobench(dest: CheckpointDestination, options: IoOptions) -> Target:
    from iobench.tiers.s3 import S3Tier

    from .s3store import S3Store

    tier = _tier_of(dest, S3Tier)
    store = S3Store(
        dest.location,
        endpoint_url=tier.endpoint_url,
        region=tier.region,
        profile=tier.config["profile"],
        stripe=options.chunk_bytes,
        deadline_s=tier.deadline_s or 30.0,
    )
    return StoreTarget(store, options, "iobench (boto3, one PUT per request)")


def _s3torch(dest: CheckpointDestination, options: IoOptions) -> Target:
    try:
        from s3torchconnector import S3ClientConfig
        from s3torchconnector._s3client import S3Client
        from s3torchconnector.dcp import S3FileSystem, S3StorageReader, S3StorageWriter
    except ImportError as exc:
        raise CheckpointError(
            f"checkpoints through s3torchconnector need it installed: pip install 'iobench[s3checkpoint]' ({exc})"
        ) from None
    from iobench.tiers.s3 import S3Tier

    tier = _tier_of(dest, S3Tier)
    region = tier.region or "us-east-1"
    config = S3ClientConfig(force_path_style=bool(tier.config["path_style"]))

    def fs() -> Any:
        return S3FileSystem(
            region, s3_client=S3Client(region, endpoint=tier.endpoint_url, s3client_config=config)
        )

    def writer(root: str) -> Any:
        w = S3StorageWriter(region, root, s3client_config=config)
        w.fs = fs()
        return w

    def reader(root: str) -> Any:
        r = S3StorageReader(region, root, s3client_config=config)
        r.fs = fs()
        return r

    return StreamTarget(
        f"S3 {dest.location} ({tier.endpoint_url or 'AWS'})",
        "s3torchconnector DCP",
        writer,
        reader,
        dest.location,
        local=False,
        storage_options=tier.storage_options(),
    )


def _fsspec(dest: CheckpointDestination, options: IoOptions) -> Target:
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter

    tier = make_tier({**dest.tier, "url": dest.location}) if dest.tier.get("kind") == "s3" else None
    storage = tier.storage_options() if tier is not None else {}
    return StreamTarget(
        f"S3 {dest.location} ({getattr(tier, 'endpoint_url', None) or 'AWS'})" if tier else dest.location,
        "torch FsspecWriter (s3fs)" if tier else "torch FsspecWriter",
        functools.partial(_fsspec_writer, FsspecWriter, storage),
        functools.partial(_fsspec_reader, FsspecReader, storage),
        dest.location,
        local=tier is None,
        storage_options=storage,
    )


def _fsspec_writer(cls, storage: dict, root: str) -> Any:
    return _keeping_options(cls(root, sync_files=False, thread_count=2, **storage), storage)


def _fsspec_reader(cls, storage: dict, root: str) -> Any:
    return _keeping_options(cls(root, **storage), storage)


def _keeping_options(io: Any, storage: dict) -> Any:
    """torch's fsspec writer and reader drop their storage options when DCP resets them to a
    checkpoint id (``init_path(checkpoint_id)`` without them: the endpoint falls back to the
    environment's); every path they open here keeps them."""
    io.fs.init_path = functools.partial(io.fs.init_path, **storage)
    return io


_MAKERS = {
    ("local", "iobench"): _local,
    ("cephfs", "iobench"): _local,
    ("local", "stock"): _stock,
    ("cephfs", "stock"): _stock,
    ("rados", "iobench"): _rados,
    ("s3", "s3torchconnector"): _s3torch,
    ("s3", "fsspec"): _fsspec,
    ("s3", "iobench"): _s3_iobench,
}
