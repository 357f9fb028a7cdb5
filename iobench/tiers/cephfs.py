"""A dataset on a mounted CephFS (ceph-fuse or the kernel client), read as plain files.

Paths, validation, page-cache eviction and residency come from LocalTier. What CephFS adds:

* the path must be on a ceph / fuse.ceph-fuse mount, and a dead ceph-fuse mount ("Transport
  endpoint is not connected") is reported as such, with what to do;
* "cold" also empties ceph-fuse's own object cache (ObjectCacher, up to client_oc_size, 200 MiB
  by default), which neither posix_fadvise nor /proc/sys/vm/drop_caches touches (measured on
  Ceph 16.2: after both, a re-read was still served 100 % from it). Through the client's admin
  socket client_oc_size is set to 0, one read is passed through the client (the cache trims only
  on a read: setting the size alone, or waiting, trimmed nothing), and the size is restored;
* describe() names the mount, the data pool (from the ceph.*.layout virtual xattrs) and the cluster.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from iobench.ceph.adminsocket import asok_command
from iobench.host import blockdev, pagecache
from iobench.host.atomic import atomic_write
from iobench.results.choices import CacheMode
from iobench.tiers.base import (
    COLD_MAX_FRACTION,
    DEADLINE_OPTION,
    DEFAULT_DEADLINE_S,
    CacheState,
    Option,
    Tier,
    TierConfigError,
    check_deadline,
)
from iobench.tiers.local import LocalTier
from iobench.tiers.objectstore import OBJECT_STORE_OPTIONS

__all__ = ["CEPH_FS_TYPES", "CephFSMountGone", "CephFSTier"]

CEPH_FS_TYPES = ("ceph", "fuse.ceph-fuse", "fuse.ceph")
# ECONNABORTED: what a FUSE mount answers right after its daemon died (measured), before ENOTCONN
_GONE_ERRNOS = (errno.ENOTCONN, errno.ECONNABORTED, errno.ESTALE, errno.ETIMEDOUT)
# a hung FUSE daemon leaves stat() waiting in the kernel for good: probe with a deadline
PROBE_TIMEOUT_S = 10.0


def _stat_within(path: str, timeout: float) -> os.stat_result:
    """os.stat that gives up (ETIMEDOUT) instead of hanging on a mount whose daemon stopped answering."""
    import concurrent.futures
    import threading

    result: concurrent.futures.Future = concurrent.futures.Future()

    def probe() -> None:
        try:
            result.set_result(os.stat(path))
        except OSError as exc:
            result.set_exception(exc)

    threading.Thread(target=probe, name="iobench-mount-probe", daemon=True).start()
    try:
        return result.result(timeout)
    except concurrent.futures.TimeoutError:
        raise OSError(errno.ETIMEDOUT, f"{path} did not answer stat() within {timeout:.0f} s") from None


_SHA_XATTR = "user.iobench.sha256"  # lets a re-upload skip a file without reading it back
_COPY_BUF = 8 << 20
_MIB = 1 << 20
SERVER_CACHES = (
    "server-side caches cannot be emptied from a client: the MDS's metadata cache and the OSDs' "
    "(a memstore OSD, as in `iobench lab`, holds every object in RAM; bluestore keeps its own "
    "buffer cache and the disks theirs), so 'cold' means cold on this client only"
)
# what the loader cannot check on CephFS, said with the cache state (docs/reliability.md, section 13)
UNCHECKED = (
    "bytes served from the client's caches are not checked against the upload's sha256 (no checksum "
    "reaches a file read; the OSDs check their own copies, and a read of a damaged one fails with EIO); "
    "a damaged region the reader meets is skipped and counted as samples lost"
)


class CephFSMountGone(OSError):
    """The CephFS mount under the tier's path no longer answers (ceph-fuse died or was killed)."""


def _mounts() -> list[dict[str, Any]]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        return blockdev.parse_mountinfo(f.read())


def _run_dirs(conffile: str | None) -> list[str]:
    """Where client admin sockets live: `run dir` of the conf file, then the packaged defaults."""
    dirs = []
    if conffile:
        try:
            text = Path(conffile).read_text(errors="replace")
        except OSError:
            text = ""
        # ceph.conf treats spaces and underscores in keys alike
        dirs += [m.group(1).strip() for m in re.finditer(r"(?m)^\s*run[ _]dir\s*=\s*(\S+)", text)]
    return [*dirs, "/var/run/ceph", "/run/ceph"]


class CephFSTier(LocalTier):
    """Shards on a CephFS mount; cold = evicted from the page cache and from ceph-fuse's cache."""

    kind: ClassVar[str] = "cephfs"
    reads_block_devices = False  # a network file system: its reads come over sockets
    options: ClassVar[dict[str, Option]] = {
        "path": Option((str, os.PathLike), required=True, help="dataset directory on a CephFS mount"),
        "name": Option(str, help="label for reports"),
        "conffile": Option(str, help="ceph.conf describing the cluster; default $CEPH_CONF"),
        "client_asok": Option(
            str, help="admin socket of the ceph-fuse client; found by its mount point when omitted"
        ),
        "drop_caches": LocalTier.options["drop_caches"],
        "upload": OBJECT_STORE_OPTIONS["upload"],
        "deadline_s": DEADLINE_OPTION,
    }

    @classmethod
    def check_options(cls, options: Any) -> dict[str, Any]:
        config = super().check_options(options)
        check_deadline("cephfs tier", config)
        return config

    @property
    def deadline_s(self) -> float:
        # every open, read and close of a shard returns within it, or the read fails
        # (loaders.storage.deadline.DeadlineFile): ceph-fuse waits for a dead OSD for good, in the kernel
        return super().deadline_s or DEFAULT_DEADLINE_S

    def __init__(self, **options: Any) -> None:
        config = self.check_options(options)
        path = os.path.realpath(os.path.abspath(os.path.expanduser(os.fspath(config["path"]))))
        mount = blockdev.find_mount(path, _mounts())
        if mount is None or mount["fs_type"] not in CEPH_FS_TYPES:
            where = f"{mount['mount_point']} ({mount['fs_type']}, source {mount['source']})" if mount else "?"
            raise TierConfigError(
                f"cephfs tier: path {path!r} is not on a CephFS mount: it is on {where}. Mount CephFS "
                "there (ceph-fuse or mount -t ceph) and point 'path' inside it, or use kind 'local'"
            )
        self.mount: dict[str, Any] = mount
        self.fuse = mount["fs_type"].startswith("fuse.")
        with self._alive():
            _stat_within(mount["mount_point"], PROBE_TIMEOUT_S)
            if os.path.lexists(path) or not os.path.isdir(os.path.dirname(path)):
                super().__init__(**options)  # LocalTier's checks: exists, a directory, readable
                self.path = path
            else:
                # Not staged yet: upload_dataset() creates it, as the S3 tier creates its bucket.
                Tier.__init__(self, **options)
                self.path = path
                self.name = config["name"] or os.path.basename(path)
        self.conffile = config["conffile"] or os.environ.get("CEPH_CONF")
        self._asok: str | None = None

    # -- the mount --------------------------------------------------------------------------
    @contextmanager
    def _alive(self) -> Iterator[None]:
        """Turn ENOTCONN/ESTALE from a dead mount into one error that says what happened."""
        try:
            yield
        except OSError as exc:
            if exc.errno not in _GONE_ERRNOS or isinstance(exc, CephFSMountGone):
                raise
            mp = self.mount["mount_point"]
            how = (
                f"fusermount -u {mp} (or umount -l {mp}), then ceph-fuse {mp}"
                if self.fuse
                else f"umount -l {mp}, then mount -t ceph ... {mp}"
            )
            raise CephFSMountGone(
                exc.errno,
                f"cephfs tier {getattr(self, 'name', mp)!r}: the CephFS mount at {mp} went away "
                f"({os.strerror(exc.errno)}: the {'ceph-fuse process' if self.fuse else 'client'} "
                f"is gone or lost its session); remount: {how}",
            ) from None

    def client_asok(self) -> str | None:
        """The ceph-fuse client's admin socket: `client_asok`, else the one whose status names our mount."""
        if not self.fuse:
            return None
        if self.config["client_asok"]:
            return self.config["client_asok"]
        if self._asok is None:
            mp = os.path.realpath(self.mount["mount_point"])
            for d in _run_dirs(self.conffile):
                for sock in sorted(glob.glob(os.path.join(d, "*.asok"))):
                    try:
                        meta = asok_command(sock, "status", timeout=2).get("metadata", {})
                    except (OSError, AttributeError):
                        continue  # a stale socket, or a daemon that is not a client
                    if meta.get("mount_point") and os.path.realpath(meta["mount_point"]) == mp:
                        self._asok = sock
                        return sock
        return self._asok

    def data_pool(self) -> tuple[str | None, str]:
        """(pool, where it was read): the nearest directory layout, else a file's layout."""
        d = self.path
        top = self.mount["mount_point"]
        while True:
            try:
                return os.getxattr(d, "ceph.dir.layout.pool").decode(), f"ceph.dir.layout.pool of {d}"
            except OSError as exc:
                if exc.errno in _GONE_ERRNOS:
                    raise
            # only directories given an explicit layout answer; the fs root always has one
            if d == top or os.path.dirname(d) == d:
                break
            d = os.path.dirname(d)
        for entry in sorted(os.listdir(self.path)) if os.path.isdir(self.path) else []:
            f = os.path.join(self.path, entry)
            if os.path.isfile(f):
                try:
                    return os.getxattr(f, "ceph.file.layout.pool").decode(), f"ceph.file.layout.pool of {f}"
                except OSError:
                    break
        return None, "no ceph.dir.layout.pool / ceph.file.layout.pool xattr answered"

    # -- cache state ------------------------------------------------------------------------
    def _client_buffers(self, asok: str) -> int | None:
        """Bytes in the client's anonymous buffers: its object cache, plus little else (~0.1 MiB idle)."""
        try:
            pools = asok_command(asok, "dump_mempools")["mempool"]["by_pool"]
            return int(pools["buffer_anon"]["bytes"])
        except (OSError, KeyError, TypeError, ValueError):
            return None

    def _drop_client_cache(self, paths: list[str]) -> tuple[bool, str]:
        """Empty ceph-fuse's object cache; (done, what happened) for the cache note."""
        asok = self.client_asok()
        if asok is None:
            return False, (
                "its object cache (client_oc_size, default 200 MiB) could NOT be emptied: no admin "
                "socket of this mount's client was found (set client_asok); posix_fadvise and "
                "drop_caches do not reach it, so up to that much may be served from client memory"
            )
        probe = next((p for p in paths if os.path.getsize(p) > 0), None)
        try:
            before = self._client_buffers(asok)
            old = asok_command(asok, "config get", var="client_oc_size")["client_oc_size"]
            try:
                asok_command(asok, "config set", var="client_oc_size", val=["0"])
                if probe is not None:
                    pagecache.evict([probe])  # so the read below reaches ceph-fuse
                    with open(probe, "rb", buffering=0) as f:
                        f.read(1)
            finally:
                asok_command(asok, "config set", var="client_oc_size", val=[str(old)])
            after = self._client_buffers(asok)
        except (OSError, KeyError, TypeError) as exc:
            if isinstance(exc, OSError) and exc.errno in _GONE_ERRNOS:
                raise
            return False, f"emptying its object cache through {asok} failed: {exc}"
        held = (
            f"client buffers {before / _MIB:.1f} MiB -> {after / _MIB:.1f} MiB"
            if before is not None and after is not None
            else "client buffer size not readable"
        )
        return True, f"object cache emptied (client_oc_size 0 and back to {old} via {asok}; {held})"

    def prepare(self, manifest: Any, cache: CacheMode) -> CacheState:
        self.check_cache_mode(cache)
        with self._alive():
            paths = self.shard_paths(manifest)
            client_note, dropped, after = "", True, None
            if cache == "cold" and self.fuse:
                present = [p for p in paths if os.path.isfile(p)]
                dropped, client_note = self._drop_client_cache(present)
            state = super().prepare(manifest, cache)  # evicts (or warms) the kernel page cache
            asok = self.client_asok() if self.fuse else None
            if asok is not None:
                after = self._client_buffers(asok)
        method, achieved, note = state.method, state.achieved, state.note
        if self.fuse:
            if cache == "cold":
                method += " + ceph-fuse object cache trim" if dropped else ""
                if not dropped and achieved == "cold":
                    achieved = "unknown"
                elif (
                    after is not None and state.total_bytes and after > COLD_MAX_FRACTION * state.total_bytes
                ):
                    # An upper bound (the buffers may hold other files), so only a downgrade.
                    achieved = "partly-cold" if achieved == "cold" else achieved
            else:
                held = f"{after / _MIB:.1f} MiB" if after is not None else "an unknown amount"
                client_note = f"its object cache holds {held} (at most client_oc_size)"
            note = f"{note}; ceph-fuse: {client_note}; {SERVER_CACHES}; {UNCHECKED}"
        else:
            note = f"{note}; the kernel client caches file data in the page cache only; {SERVER_CACHES}; {UNCHECKED}"
        state = replace(state, method=method, achieved=achieved, note=note)
        return state

    # -- description ------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        with self._alive():
            out = super().describe()
            pool, pool_from = self.data_pool()
        out["mount"] = {
            "fs_type": self.mount["fs_type"],
            "source": self.mount["source"],
            "mount_point": self.mount["mount_point"],
            "client": "ceph-fuse" if self.fuse else "kernel",
        }
        out["data_pool"] = pool
        out["data_pool_from"] = pool_from
        out["conffile"] = self.conffile
        asok = self.client_asok()
        if asok is not None:
            client: dict[str, Any] = {"admin_socket": asok}
            try:
                client["client_oc_size"] = int(
                    asok_command(asok, "config get", var="client_oc_size")["client_oc_size"]
                )
                client["version"] = asok_command(asok, "version").get("version")
            except (OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
                client["error"] = str(exc)
            out["client"] = client
        try:
            from iobench.ceph.cluster import describe_cluster  # lazy: needs librados or the ceph CLI
        except ImportError as exc:
            out["cluster"] = {"unavailable": f"iobench.ceph.cluster could not be imported: {exc}"}
        else:
            try:
                out["cluster"] = describe_cluster(
                    self.conffile, pool=pool, timeout=min(10.0, self.deadline_s or 10.0)
                )
            except Exception as exc:  # a report with a gap beats a failed benchmark
                out["cluster"] = {"error": f"{type(exc).__name__}: {exc}"}
        return out

    # -- staging ----------------------------------------------------------------------------
    def upload_dataset(self, dataset_dir: str) -> str:
        """Copy shards and indexes, then the manifest; skips files already there (size + sha256)."""
        from iobench.datasets.upload import split_indexes, upload_files

        from ..datasets.manifest import MANIFEST_NAME, Manifest, sha256_file

        src = Path(dataset_dir)
        manifest = Manifest.load(src)
        dst = Path(self.path)
        copied, skipped = [], []
        with self._alive():
            dst.mkdir(parents=True, exist_ok=True)
            new_manifest = (src / MANIFEST_NAME).read_bytes()
            old = dst / MANIFEST_NAME
            if old.exists() and old.read_bytes() != new_manifest:
                # a reader must never pair the old manifest with new shards: unmark it first
                old.unlink()
            body, indexes = split_indexes(upload_files(src, manifest))
            for path, rel, sha in body + indexes:  # an objects index only after its objects
                sha = sha or sha256_file(path)
                target = dst / rel
                if _same(target, path.stat().st_size, sha):
                    skipped.append(rel)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    _copy(path, target, sha)
                    copied.append(rel)
            if old.exists():
                skipped.append(MANIFEST_NAME)
            else:
                with atomic_write(old) as f:
                    f.write(new_manifest)
                copied.append(MANIFEST_NAME)
        return f"{dst}: {len(copied)} copied, {len(skipped)} already there (size+sha256)"


def _same(target: Path, size: int, sha: str) -> bool:
    try:
        if target.stat().st_size != size:
            return False
    except FileNotFoundError:
        return False
    try:
        return os.getxattr(target, _SHA_XATTR).decode() == sha
    except OSError as exc:
        if exc.errno in _GONE_ERRNOS:
            raise
    from ..datasets.manifest import sha256_file

    return sha256_file(target) == sha  # copied by other means: read it back once


def _copy(src: Path, target: Path, sha: str) -> None:
    h = hashlib.sha256()
    with open(src, "rb") as fin, atomic_write(target) as fout:
        while block := fin.read(_COPY_BUF):
            h.update(block)
            fout.write(block)
        if h.hexdigest() != sha:  # raising here leaves no temp and no target behind
            raise OSError(
                errno.EIO, f"{src}: sha256 {h.hexdigest()} differs from the manifest's {sha}; not staged"
            )
        with contextlib.suppress(OSError):  # no user xattrs: a re-upload hashes the file instead
            os.setxattr(fout.fileno(), _SHA_XATTR, sha.encode())
