"""A shard cache that degrades and never stops the job: when its disk fills (ENOSPC, a quota),
fails (EIO), is read-only, or its directory is removed under the job, the shards are read
through from the store, as without a cache: the reason is said once (a warning in the log, a
note in the loader's stats), the bytes that went around the cache are counted, and the cache is
tried again for new entries after ``RETRY_S``. A cache is an optimisation; a training job reading
through it must not crash where reading the store would have worked.
"""

from __future__ import annotations

import errno
import logging
import time
from typing import BinaryIO

from loaders.observe.counters import CacheHealthCounts

RETRY_S = 30.0  # how long a cache found unusable is left alone before new entries try it again
_REASONS = {
    errno.ENOSPC: "its file system is full (ENOSPC)",
    errno.EDQUOT: "its disk quota is used up (EDQUOT)",
    errno.EROFS: "its file system is read-only (EROFS)",
    errno.EIO: "its disk reported an I/O error (EIO)",
    errno.EACCES: "it is not writable (EACCES)",
    errno.EPERM: "it is not writable (EPERM)",
    errno.ENOENT: "its directory is gone (ENOENT)",
    errno.EFBIG: "the shard is larger than the whole cache",
}
# errors of the cache's own disk: a download cut by one of these is the cache's failure, not the store's
MEDIUM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM)
log = logging.getLogger("loaders.storage")


def cache_reason(exc: BaseException) -> str:
    """Why the cache could not be used, in words, from the error's errno."""
    number = getattr(exc, "errno", None)
    return _REASONS.get(number, f"{type(exc).__name__}") if number is not None else type(exc).__name__


class CacheHealth:
    """Whether this process's cache may be used now, and what it said about it."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.down_until = 0.0
        self.counts = CacheHealthCounts()
        self.notes: list[str] = []
        self._said: set[str] = set()

    def usable(self) -> bool:
        return time.monotonic() >= self.down_until

    def failed(self, exc: BaseException, url: str) -> None:
        """The cache failed on ``url`` with ``exc``: read through for a while, and say so once."""
        why = cache_reason(exc)
        self.counts.unusable += 1
        if getattr(exc, "errno", None) == errno.EFBIG:  # that shard alone: nothing to wait for
            self.say(why, f"{url}: {why} at {self.directory}: read through from the store, not cached")
            return
        self.down_until = time.monotonic() + RETRY_S
        self.say(
            why,
            f"the shard cache at {self.directory} cannot be used: {why} ({exc}); shards are read through "
            f"from the store, and new entries try the cache again after {RETRY_S:g} s",
        )

    def say(self, kind: str, text: str) -> None:
        """``text`` once per ``kind`` in this process: a warning in the log and a note in the stats."""
        if kind in self._said:
            return
        self._said.add(kind)
        self.notes.append(text)
        log.warning("%s", text)

    def bypassing(self, f: BinaryIO) -> BinaryIO:
        """``f`` (a shard read through the store) counting the bytes it reads as bypassed."""
        return _Counted(f, self)  # type: ignore[return-value]  # a file-like object: typing.BinaryIO is a class, not a protocol it could meet

    def drain(self) -> tuple[CacheHealthCounts | None, list[str]]:
        """The counts (None: nothing was counted) and notes since the last drain."""
        done, notes = self.counts, self.notes
        self.counts, self.notes = CacheHealthCounts(), []
        return (done if done != CacheHealthCounts() else None), notes


class _Counted:
    """A stream whose reads add their length to the cache's ``bypassed_bytes``."""

    def __init__(self, raw: BinaryIO, health: CacheHealth) -> None:
        self._raw, self._health = raw, health  # its counts are replaced at each drain

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._health.counts.bypassed_bytes += len(data)
        return data

    def __getattr__(self, name: str):
        return getattr(self._raw, name)
