"""A bounded, process-safe local shard cache: the local NVMe cache in front of S3/Ceph.

fsspec's own caches are unbounded and not safe for several processes (fsspec #510, #639, #1126);
this one is shared by every DataLoader worker and every training process on the host. The
directory layout and the lock primitives are in ``cache_index.py``.

Locking. A download holds its key's flock from before its temp file exists until after it is
renamed or removed, so a second process asking for the same url blocks in flock (never a sleep
loop) and then finds the complete file; a crashed writer's lock dies with its descriptor and its
temp is removed by the next scan. Lock order is key lock, then the global lock; under the global
lock key locks are only *tried* (LOCK_NB), so an entry being downloaded or opened is skipped by
eviction and nothing can deadlock. Files appear only by ``os.replace`` of a complete temp file (fsynced when durable) in
the same directory: a reader sees no file or the whole file.

Accounting and reservation. The total is computed from the directory listing under the global
lock, never from per-process counters. In-flight downloads count with max(reservation, bytes
written so far), and the reservation is encoded in the temp file's *name*: reserving and creating
the temp are one atomic step under the global lock, and a crash leaves nothing to reconcile. So
complete files + reservations never exceed max_bytes. When the room is held by other downloads in
flight, a reserver waits (in flock) for one of them to finish, then evicts it if need be. A
download of unknown size is charged by its growing temp file and may take the directory over the
limit while it runs; before its rename LRU entries are evicted, so complete files never exceed
max_bytes. (Such a download only waits for known-size downloads, which never wait themselves:
the waits cannot form a cycle.) A known-size download also evicts until the *disk* has room for it
(a limit set above the free space); a disk that fills anyway (ENOSPC) makes the download evict the
least recently used entries and start again once, then fail with a CacheError naming ENOSPC.

The directory must be on a local filesystem (flock on NFS is not the same lock across hosts).

Recency is the file's mtime, set to time.time_ns() on every hit (the kernel's own timestamps are
tick-coarse, which would make consecutive hits tie).

Admission. ``policy="lru"`` admits every miss and evicts the least recently used entries to make
room. That is right when the cache holds the dataset, and wrong when it does not: under shuffled
full epochs LRU keeps r + (1 - r) ln(1 - r) of the reads for a cache of r of the data (6 % at
r = 1/3), and every miss pays a write and an eviction on top of the download, so the cached path
runs slower than no cache at all. ``policy="static"`` keeps what it has cached and never evicts:
a miss is admitted while it fits, and once the cache is full a miss is read through (``get``
returns None; the caller streams it, as without a cache) at no extra cost. It serves r of the
reads of every epoch after the first. A static cache admits only misses of known size (it cannot
reserve for others). The choice per dataset is ``choose_policy``: static when the cache cannot
hold it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import re
import time
from collections.abc import Callable
from typing import BinaryIO

from loaders.observe.counters import CacheStats
from loaders.storage.entrysum import PART_BYTES, EntrySum, damaged_parts, digests, read_sum, write_sum
from loaders.storage.localfile import open_local
from loaders.storage.shardcache_index import (
    CacheDir,
    CachedShard,
    Download,
    fsync_dir,
    key_of,
    readable_name,
    unlink_quiet,
)
from loaders.storage.spec import CACHE_POLICIES

_MD5_RE = re.compile(r"^[0-9a-f]{32}$")

Fetch = Callable[[str, BinaryIO], None]
# a static cache found full is not asked again for this long: misses then read through at the
# price of one failed utime() each, not a lock and a directory scan
_FULL_RECHECK_S = 1.0


def choose_policy(policy: str, cache_bytes: int, dataset_bytes: int | None) -> str:
    """``"auto"``: static when the dataset is known to be larger than the cache, else lru; any
    other value as given (checked)."""
    if policy == "auto":
        return "static" if dataset_bytes is not None and dataset_bytes > cache_bytes else "lru"
    if policy not in CACHE_POLICIES:
        raise ValueError(f"cache policy {policy!r}: expected auto, {' or '.join(CACHE_POLICIES)}")
    return policy


class CacheError(OSError):
    """The cache cannot hold or produce a shard; the message says which limit or check failed."""


class StoreChecksumError(CacheError):
    """A download's bytes are not what the store's own checksum (a single-part ETag's MD5, the
    sha256 recorded at upload) says: the store's copy is damaged, or changed since. Not cached."""


class _Declined(Exception):
    """A static cache has no room for this miss: it is read through."""


class ShardCache:
    """Local copies of remote shards, at most ``max_bytes`` of them, shared safely by processes."""

    def __init__(
        self,
        directory: str | os.PathLike,
        max_bytes: int,
        *,
        durable: bool = False,
        policy: str = "lru",
        verify: bool = True,
    ) -> None:
        """``durable=True`` fsyncs every entry and its rename, so entries survive a power cut; it
        halves miss throughput on this kind of VM. Without it a process crash still never exposes a
        partial file (the rename is atomic), and a hit whose size is wrong is downloaded again.
        ``policy``: "lru" or "static" (see Admission in the module docstring). ``verify``: check
        each entry against its checksums at fill when this process first opens it (open_shard)."""
        if max_bytes <= 0:
            raise ValueError(f"max_bytes={max_bytes}: must be positive")
        if policy not in CACHE_POLICIES:
            raise ValueError(f"policy={policy!r}: expected {' or '.join(CACHE_POLICIES)}")
        self.directory = os.fspath(directory)
        self.max_bytes = int(max_bytes)
        self.durable = durable
        self.policy = policy
        self.verify = verify
        self._full_until = 0.0
        self._dir = CacheDir(self.directory)
        self.stats = CacheStats()
        self.notes: list[str] = []  # what this process found, said once each (drained by the reader)
        # (inode, fill time, part) of the parts this process has checked: each is checked once
        self._checked: set[tuple[int, int, int]] = set()
        try:
            os.makedirs(self._dir.locks, exist_ok=True)
            os.makedirs(self._dir.sums, exist_ok=True)
            os.close(os.open(self._dir.global_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666))
            # an existing .lock proves nothing about today's permissions: create and remove a file
            probe = os.path.join(self.directory, f".probe-{os.getpid()}")
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))
            os.unlink(probe)
        except OSError as exc:
            raise CacheError(
                exc.errno, f"cache directory {self.directory!r} is not usable (not writable?): {exc}"
            ) from exc

    # ---- public API -------------------------------------------------------------------------

    def path_for(self, url: str) -> str:
        """Where the complete copy of ``url`` lives (whether or not it is cached now)."""
        return os.path.join(self.directory, f"{key_of(url)}-{readable_name(url)}")

    def get(
        self,
        url: str,
        fetch: Fetch,
        *,
        size: int | None = None,
        etag: str | None = None,
        sha256: str | None = None,
    ) -> str | None:
        """Return the path of a complete, verified local copy of ``url``, downloading it if needed;
        None when a static cache does not admit it (full, or its size unknown): read it through.

        ``fetch(url, f)`` writes the object's bytes into the binary file ``f``. With ``size`` the
        download is checked for length and room is reserved before it starts; with ``sha256`` (what
        a dataset's manifest recorded at upload) or ``etag`` of a single-part S3 upload (the MD5 of
        the bytes) the content is checked too, and a mismatch is a :class:`StoreChecksumError`. A
        multipart ETag (it contains a '-') is an MD5 of part MD5s and cannot be checked against the
        bytes, nor can an ETag that is not 32 hex digits: then only the size is verified. Either
        way the entry's own part checksums are recorded beside it (entrysum.py).

        The returned path stays valid until the entry is evicted, which only happens under
        pressure and to the least recently used entries; ``open_shard`` returns an open file
        instead, which stays readable even if the entry is evicted afterwards.
        """
        path = self.path_for(url)
        if self._touch(path, size):  # lock-free hit: the common case in steady state
            self.stats.hits += 1
            return path
        if self.policy == "static" and (size is None or time.monotonic() < self._full_until):
            self._bypass()
            return None
        sha = os.path.basename(path)[:64]
        fd, waited = self._dir.lock_key(sha, fcntl.LOCK_EX, block=True)
        assert fd is not None
        try:
            self.stats.wait_s += waited
            if self._touch(path, size, url):  # another process downloaded it while we waited
                self.stats.hits += 1
                return path
            try:
                self._download(url, fetch, path, sha, size, (etag, sha256))
            except _Declined:
                self._full_until = time.monotonic() + _FULL_RECHECK_S
                self._bypass()
                return None
            self.stats.misses += 1
            return path
        finally:
            os.close(fd)

    def open_shard(
        self,
        url: str,
        fetch: Fetch,
        *,
        size: int | None = None,
        etag: str | None = None,
        sha256: str | None = None,
        start: int = 0,
        end: int | None = None,
    ) -> BinaryIO | None:
        """Like get(), but return the cached copy opened for reading, with no eviction race, its
        bytes ``[start, end)`` checked against the checksums recorded at fill where this process
        has not checked them yet (None where get() gives None, or where other processes evicted it
        three times before it could be opened: read the shard through).

        A damaged entry (a part's checksum differs, its size changed, or it has none recorded) is
        evicted, counted, said once in ``notes`` and fetched again. A shared key lock is held while
        opening and checking, so eviction (which only tries key locks) cannot remove the entry in
        between; once open, the file stays readable even if evicted.
        """
        sha = key_of(url)
        for _ in range(3):
            path = self.get(url, fetch, size=size, etag=etag, sha256=sha256)
            if path is None:
                return None
            fd, _waited = self._dir.lock_key(sha, fcntl.LOCK_SH, block=True)
            assert fd is not None
            try:
                f = open_local(path)  # as a local shard is read: mapped (loaders/storage/localfile.py)
                damage = self._check(url, sha, path, f, start, end)
            except FileNotFoundError:
                continue  # evicted between get() and the lock: the cache is thrashing; fetch again
            finally:
                os.close(fd)
            if damage is None:
                return f
            f.close()
            self._evict_damaged(sha, path, damage)
        # other processes evicted it between its download and the open, three times: an LRU far
        # smaller than what they read at once; this one is read through rather than fail the reader
        self.stats.bypassed += 1
        return None

    def _check(
        self, url: str, sha: str, path: str, f: BinaryIO, start: int, end: int | None
    ) -> tuple[str, int] | None:
        """What is wrong with the entry ``path`` of ``url``, open as ``f``, in bytes ``[start,
        end)``, and its inode (None: nothing, or already checked by this process), against its sum
        recorded at fill. The caller holds the key lock, so ``path`` is the file open as ``f``."""
        if not self.verify:
            return None
        st = os.stat(path)
        summed = read_sum(self._dir.sum_path(sha))
        if summed is None:
            return (
                f"{url}: its cache entry has no checksums recorded (filled by an older version?)",
                st.st_ino,
            )
        if st.st_size != summed.size:
            return f"{url}: its cache entry is {st.st_size:,} bytes, {summed.size:,} when filled", st.st_ino
        todo = [p for p in summed.parts(start, end) if (st.st_ino, summed.filled_ns, p) not in self._checked]
        if not todo or not isinstance(f, mmap.mmap):
            return None  # an empty entry cannot be mapped: its size was its check
        with memoryview(f) as data:
            bad = damaged_parts(data, summed, todo)
        self.stats.verified_bytes += sum(e - b for b, e in map(summed.span, todo))
        if bad:
            spans = [summed.span(p) for p in bad]
            self.stats.damaged_bytes += sum(e - b for b, e in spans)
            where = ", ".join(f"{b:,}-{e:,}" for b, e in spans)
            return f"{url}: its cache entry's bytes {where} differ from their checksums at fill", st.st_ino
        self._checked.update((st.st_ino, summed.filled_ns, p) for p in todo)
        return None

    def _evict_damaged(self, sha: str, path: str, damage: tuple[str, int]) -> None:
        """Remove the damaged entry at ``path`` (unless another process has replaced it meanwhile:
        a new inode), count it and say so once."""
        what, inode = damage
        self.stats.damaged += 1
        self.notes.append(f"{what}: evicted and fetched again")
        fd, _ = self._dir.lock_key(sha, fcntl.LOCK_EX, block=True)
        try:
            if os.stat(path).st_ino == inode:
                unlink_quiet(path)
                unlink_quiet(self._dir.sum_path(sha))
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def contains(self, url: str) -> bool:
        return os.path.exists(self.path_for(url))

    def used_bytes(self) -> int:
        """Bytes of complete cached shards (in-flight downloads are not included)."""
        with self._dir.global_lock():
            return sum(e.size for e in self._dir.scan(clean=False)[0])

    def clear(self) -> None:
        """Remove every entry not in use, stale temp files, unused lock files and the checksums of
        entries that are gone.

        Entries being downloaded or opened right now are left alone. Removals here are not
        counted as evictions (those measure cache pressure).
        """
        with self._dir.global_lock():
            for entry in self._dir.scan(clean=True)[0]:
                self._dir.remove_entry(entry)
            self._dir.remove_orphan_sums()
            self._dir.remove_unused_locks()

    def reset_stats(self) -> CacheStats:
        """Return the counters so far and start new ones (per-epoch accounting)."""
        done, self.stats = self.stats, CacheStats()
        return done

    def _bypass(self) -> None:
        self.stats.misses += 1
        self.stats.bypassed += 1

    # ---- room (callers hold the global lock) ------------------------------------------------

    def _evict(self, entries: list[CachedShard], need: int, keep: str) -> tuple[int, list[str]]:
        """Evict least recently used entries until ``need`` bytes are freed.

        Returns the bytes freed and the keys of entries skipped because they were locked.
        """
        freed, busy = 0, []
        for entry in sorted(entries, key=lambda e: (e.mtime_ns, e.name)):
            if freed >= need:
                break
            if entry.sha == keep:
                continue
            if not self._dir.remove_entry(entry):
                busy.append(entry.sha)
                continue
            entries.remove(entry)
            freed += entry.size
            self.stats.evictions += 1
            self.stats.bytes_evicted += entry.size
        return freed, busy

    def _make_room(
        self, url: str, size: int, *, keep: str, held: str = "", may_wait: Callable[[Download], bool]
    ) -> str | None:
        """Evict until ``size`` more bytes fit; else name a key whose holder will give room back."""
        entries, inflight = self._dir.scan(clean=True, held=held)
        used = sum(e.size for e in entries) + sum(t.charged for t in inflight)
        busy: list[str] = []
        need = max(used + size - self.max_bytes, self._disk_shortfall(size, inflight))
        if need > 0 and self.policy == "static":
            raise _Declined  # a static cache keeps what it has: this miss is read through
        if need > 0:
            freed, busy = self._evict(entries, need, keep)
            used -= freed
        if used + size <= self.max_bytes:
            return None
        # downloads in flight become evictable entries when done; locked entries are held briefly
        waitable = [t.sha for t in inflight if t.sha != keep and may_wait(t)] + busy
        if waitable:
            return waitable[0]
        raise CacheError(
            errno.ENOSPC,
            f"{url}: no room for {size} bytes in the {self.max_bytes}-byte cache: {used} bytes are held "
            "by downloads of unknown size in flight",
        )

    def _disk_shortfall(self, size: int, inflight: list[Download]) -> int:
        """Bytes the filesystem lacks for ``size`` more, after the downloads in flight finish.

        A limit above the disk's free space (other files share it, or it was set too high) would
        otherwise be found by ENOSPC half-way through a download, which is then thrown away and
        fetched again; evicting first saves that transfer. ENOSPC stays handled in _write: other
        programs may fill the disk meanwhile, and unknown sizes cannot be planned for.
        """
        if size <= 0:
            return 0
        st = os.statvfs(self.directory)
        pending = sum(max(0, t.reserved - t.written) for t in inflight)
        # files take whole blocks; the entry's checksums (.sums) take one more
        on_disk = (-(-(size + pending) // st.f_frsize) + 1) * st.f_frsize
        return max(0, on_disk - st.f_bavail * st.f_frsize)

    def _room_then(
        self, url: str, size: int, sha: str, *, reserving: bool, action: Callable[[], None]
    ) -> None:
        """Make room under the global lock and run ``action`` there; wait outside it if needed."""
        while True:
            with self._dir.global_lock():
                if reserving:  # no temp of ours yet: every temp of this key is stale; wait on any
                    busy = self._make_room(url, size, keep=sha, held=sha, may_wait=lambda t: True)
                else:  # we own a temp: wait only on known-size downloads, which never wait
                    busy = self._make_room(url, size, keep=sha, may_wait=lambda t: t.reserved > 0)
                if busy is None:
                    action()
                    return
            self.stats.wait_s += self._dir.wait_for(busy)

    # ---- the miss path (caller holds the key lock) ------------------------------------------

    def _touch(self, path: str, size: int | None = None, url: str | None = None) -> bool:
        """Mark a hit as recently used; an entry of the wrong size (cut short, torn by a power cut
        on a non-durable cache) is no hit, and the download that follows replaces it; with ``url``
        (the caller holds the key lock) it is counted as damaged and said."""
        try:
            now = time.time_ns()
            os.utime(path, ns=(now, now))
            found = os.stat(path).st_size
        except FileNotFoundError:
            return False
        if size is None or found == size:
            return True
        if url is not None:
            self.stats.damaged += 1
            self.stats.damaged_bytes += abs(size - found)
            self.notes.append(f"{url}: its cache entry is {found:,} bytes, the shard {size:,}: fetched again")
        return False

    def _download(
        self,
        url: str,
        fetch: Fetch,
        path: str,
        sha: str,
        size: int | None,
        store_sums: tuple[str | None, str | None],
    ) -> None:
        if size is not None and size > self.max_bytes:
            raise CacheError(
                errno.EFBIG,
                f"{url}: shard of {size} bytes is larger than the whole cache ({self.max_bytes} bytes)",
            )
        tmp = self._dir.part_path(sha, size or 0)

        def create() -> None:  # under the global lock, so the next scan already sees the reservation
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))

        self._room_then(url, size or 0, sha, reserving=True, action=create)
        try:
            written = self._write(url, fetch, tmp, sha, size)
            summed = self._verify(url, tmp, written, size, *store_sums)
            self._record(url, sha, summed)  # before the entry appears: never one without
            if size is not None:
                # reservation == size, so the total does not change; but a scan running meanwhile
                # could list neither the temp (renamed away) nor the entry (not listed yet) and
                # undercount: rename under the global lock, like every other change of the total
                with self._dir.global_lock():
                    self._commit(tmp, path)
            elif written > self.max_bytes:
                raise CacheError(
                    errno.EFBIG,
                    f"{url}: shard of {written} bytes is larger than the whole cache ({self.max_bytes} bytes)",
                )
            else:  # our temp is in the scan at its real size: make the total fit, then rename
                self._room_then(url, 0, sha, reserving=False, action=lambda: self._commit(tmp, path))
            self.stats.bytes_fetched += written
            # its bytes were just summed from the file itself: this process need not check them again
            self._checked.update((os.stat(path).st_ino, summed.filled_ns, p) for p in range(len(summed.xxh3)))
        finally:
            unlink_quiet(tmp)  # no-op after a commit; otherwise never leave a partial file behind

    def _write(self, url: str, fetch: Fetch, tmp: str, sha: str, size: int | None) -> int:
        """Run fetch into the temp file and fsync it; on ENOSPC evict more and retry once."""
        for attempt in (1, 2):
            partial = 0
            try:
                with open(tmp, "wb") as f:
                    try:
                        fetch(url, f)
                        f.flush()
                        if self.durable:
                            os.fsync(f.fileno())
                        return os.fstat(f.fileno()).st_size
                    finally:
                        with contextlib.suppress(OSError, ValueError):  # ValueError: fetch closed f
                            partial = os.fstat(f.fileno()).st_size
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                os.truncate(tmp, 0)  # give the space back before asking for more
                if self.policy == "static":
                    raise _Declined from exc  # the disk filled meanwhile: read this one through
                if attempt == 2:
                    raise CacheError(
                        errno.ENOSPC, f"{url}: disk full (ENOSPC) writing the cache even after eviction"
                    ) from exc
                with self._dir.global_lock():
                    entries, _ = self._dir.scan(clean=True)
                    freed, _busy = self._evict(entries, max(size or 0, partial, 1), keep=sha)
                if not freed:
                    raise CacheError(
                        errno.ENOSPC, f"{url}: disk full (ENOSPC) and no cache entry could be evicted"
                    ) from exc
        raise AssertionError("unreachable")

    def _verify(
        self, url: str, tmp: str, written: int, size: int | None, etag: str | None, sha256: str | None
    ) -> EntrySum:
        """Check the download against its size and the store's checksum; its sum to record."""
        if size is not None and written != size:
            raise CacheError(errno.EIO, f"{url}: size mismatch: expected {size} bytes, got {written}")
        md5 = (etag or "").strip().strip('"').lower()
        md5 = md5 if _MD5_RE.match(md5) else ""  # a multipart ETag is no MD5 of the bytes
        sha256 = (sha256 or "").lower()
        found = digests(tmp, md5=bool(md5) and not sha256, sha256=bool(sha256))
        for name, want, got in (("sha256", sha256, found.sha256), ("MD5 (its ETag)", md5, found.md5)):
            if want and got is not None and got != want:
                raise StoreChecksumError(
                    errno.EIO,
                    f"{url}: the store's copy does not match its {name} ({want}, the download's {got}): "
                    "damaged in the store, or changed since its checksum was recorded",
                )
        checked = "sha256" if sha256 else "etag-md5" if md5 else "size" if size is not None else "none"
        return EntrySum(found.size, PART_BYTES, found.xxh3, checked, time.time_ns())

    def _record(self, url: str, sha: str, summed: EntrySum) -> None:
        """Write the entry's checksums beside it; a disk filled meanwhile (by other programs)
        evicts the least recently used entry and tries once more."""
        try:
            write_sum(self._dir.sum_path(sha), summed)
            return
        except OSError as exc:
            if exc.errno != errno.ENOSPC or self.policy == "static":
                raise
        with self._dir.global_lock():
            entries, _ = self._dir.scan(clean=True)
            freed, _busy = self._evict(entries, 1, keep=sha)
        if not freed:
            raise CacheError(
                errno.ENOSPC, f"{url}: disk full (ENOSPC) writing its checksums, nothing to evict"
            )
        write_sum(self._dir.sum_path(sha), summed)

    def _commit(self, tmp: str, path: str) -> None:
        now = time.time_ns()
        os.utime(tmp, ns=(now, now))
        os.replace(tmp, path)  # atomic: readers see no file or the whole file
        if self.durable:
            fsync_dir(self.directory)  # make the rename durable, so a power cut cannot lose the entry


def default_cache_bytes(directory: str) -> int:
    """Half of the free space on the cache's filesystem: a bound the user did not have to pick. A
    directory that cannot be made (a read-only file system) is measured where it would be: the
    cache then reads around it (cachehealth.py) rather than stop the job here."""
    with contextlib.suppress(OSError):
        os.makedirs(directory, exist_ok=True)
    where = os.path.abspath(directory)
    while not os.path.isdir(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    st = os.statvfs(where)
    return max(1, st.f_bavail * st.f_frsize // 2)
