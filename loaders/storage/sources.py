"""Where shard bytes come from: a :class:`ShardSource` reads what a
:class:`~loaders.storage.spec.SourceSpec` describes, through the layers that spec asks for
(loaders/storage/layers.py).

A source is built from its picklable spec and opens its clients lazily, in the process that
reads (DataLoader workers fork or spawn after the loader is built; network clients do not
survive either).
"""

from __future__ import annotations

import contextlib
from typing import BinaryIO

from loaders.observe.losses import Loss
from loaders.observe.stages import StageStats
from loaders.storage.layers import stack
from loaders.storage.spec import SourceSpec


class ShardSource:
    """Opens shards and reads whole objects as ``spec`` says; one per reading process."""

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self._opener = stack(spec)
        self._lost: list[Loss] = []

    def lost(self, loss: Loss) -> None:
        """A region of a shard a reader skipped as damaged: counted at the next drain."""
        self._lost.append(loss)

    def open(
        self, url: str, start: int = 0, end: int | None = None
    ) -> contextlib.AbstractContextManager[BinaryIO]:
        """The shard as a stream from byte ``start``; past ``end`` nothing is needed (an object
        store GETs only [start, end); a file may read on)."""
        return self._opener.open(url, start, end)

    def read_object(self, url: str) -> bytes:
        """A whole (small) object: one ranged GET on an object store, one read on a file system."""
        return self._opener.read_object(url)

    def drain_into(self, stats: StageStats) -> None:
        """Move the request, cache and throttle counters, and the regions readers skipped, gathered
        since the last drain into ``stats``."""
        self._opener.drain_into(stats)
        for loss in self._lost:
            stats.add_loss(loss)
        self._lost = []

    def close(self) -> None:
        self._opener.close()
