"""Where iobench's own checkpoint writer puts its bytes: a store of parts (files, or striped
objects), written at offsets with several requests in flight, committed in one step at the end.

A store holds any number of checkpoints, each under its id (a directory name, an object prefix).
While a checkpoint is written its parts are invisible to a reader: a reader opens a checkpoint by
its metadata, and a store writes the metadata only in :meth:`Store.commit`, after every part is
durable (a file store writes into a staging directory and renames it into place).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

METADATA_NAME = ".metadata"


class PartWriter(Protocol):
    def pwrite(self, data: memoryview, offset: int) -> int: ...

    def close(self) -> None:
        """Make every byte written durable (fsync, or the store's acknowledgement) and release."""


class PartReader(Protocol):
    size: int

    def preadinto(self, buf: memoryview, offset: int) -> int: ...

    def close(self) -> None: ...


class Store(Protocol):
    where: str  # the tier in words, for errors ("local disk /data (O_DIRECT)")
    alignment: int  # offsets and lengths of every request are multiples of it (O_DIRECT: 4096)
    # every item starts on a multiple of it (default 4096; one object per request: the request size)
    item_alignment: int

    def open_part(self, checkpoint_id: str, name: str) -> PartWriter: ...

    def commit(self, checkpoint_id: str, metadata: bytes) -> None: ...

    def abort(self, checkpoint_id: str) -> None:
        """Remove what a failed save wrote of ``checkpoint_id`` (never a committed checkpoint)."""

    def read_metadata(self, checkpoint_id: str) -> bytes: ...

    def open_reader(self, checkpoint_id: str, name: str) -> PartReader: ...

    def locate(self, checkpoint_id: str, name: str) -> str:
        """The part's full name (a path, an object name) for a message."""

    def local_files(self, checkpoint_id: str) -> list[str]:
        """The committed checkpoint's files on this host's file systems (for the page cache), or []."""

    def remove(self, checkpoint_id: str) -> None:
        """Remove the checkpoint, committed or not."""

    def clear(self) -> None:
        """Remove every checkpoint the store holds (a root or prefix of the caller's own)."""


@dataclass
class IoLog:
    """Requests one save or load made: each one's seconds and bytes, thread-safe to append to."""

    seconds: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextmanager
    def request(self, nbytes: int) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        elapsed = time.perf_counter() - t0
        with self._lock:
            self.seconds.append(elapsed)
            self.sizes.append(nbytes)

    def add(self, seconds: float, nbytes: int) -> None:
        with self._lock:
            self.seconds.append(seconds)
            self.sizes.append(nbytes)

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    def __getstate__(self) -> dict:
        """Its figures without its lock: a rank's log travels to rank 0 (pickled)."""
        return {"seconds": self.seconds, "sizes": self.sizes}

    def __setstate__(self, state: dict) -> None:
        self.seconds, self.sizes, self._lock = state["seconds"], state["sizes"], threading.Lock()
