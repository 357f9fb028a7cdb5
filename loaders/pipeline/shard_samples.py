"""A reader's shards, sample by sample: the pipeline's first stage for shards, and its shard cursor.

The items are whole shard URLs or :class:`loaders.plan.Part` s of shards; each is read by its
format's reader (the table of formats, by suffix). The state is where the next sample is: which
item, which sample of it, and the byte where that sample begins, so that a reset reader opens the
shard there (a ranged request on an object store, a seek on a file) and reads nothing before it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from loaders.formats.base import (
    DEFAULT_MAX_MEMBER_BYTES,
    WHOLE_SHARD,
    Extent,
    IndexedSpan,
    ReadOptions,
    Ref,
    Sample,
)
from loaders.formats.table import reader_for
from loaders.pipeline.node import Node, State
from loaders.plan import Part

if TYPE_CHECKING:
    from loaders.storage.sources import ShardSource


def _bounds(item: str | Part) -> tuple[str, Extent]:
    if isinstance(item, Part):
        return item.url, Extent(item.start, item.stop, ranged=item.ranged)
    return item, WHOLE_SHARD


class ShardSamples(Node[Sample]):
    """The samples of ``items`` in order, read from ``source``; each sample's ``ref`` is (its item,
    its index in the shard, its span), by which :meth:`restore` reads it again alone. ``on_error``
    the pipeline's policy, for damaged regions of a shard too."""

    def __init__(
        self,
        items: Sequence[str | Part],
        source: ShardSource,
        max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
        on_error: str = "skip",
    ) -> None:
        self.items, self.storage = list(items), source
        # "skip": a damaged region is skipped and counted by the source (its losses), as a corrupt
        # sample is skipped and counted; "fail": it is the reader's ShardFormatError
        self._options = ReadOptions(max_member_bytes, source.lost if on_error == "skip" else None)
        self._samples: Iterator[Sample] | None = None
        self._stop: int | None = None  # the open item's: where its part ends
        self._item, self._at = 0, 0
        self._index: int | None = None  # where a resumed read goes on inside the item

    def reset(self, state: State | None = None) -> None:
        self._close_shard()
        if state is None:
            self._item, self._index, self._at = 0, None, 0
        else:
            self._item, self._index, self._at = state["item"], state["index"], state["at"]
        super().reset(state)

    def next(self) -> Sample:
        while self._item < len(self.items):
            if self._samples is None:
                url, extent = _bounds(self.items[self._item])
                self._stop = extent.stop
                if self._index is not None:  # resumed inside the item
                    extent = replace(extent, start=self._index, at=self._at)
                self._samples = reader_for(url).read(self.storage, url, extent, self._options)
            sample = next(self._samples, None)
            if sample is None:
                self._next_item()
                continue
            sample.ref = (self._item, sample.index, *sample.span)
            if sample.final or (self._stop is not None and sample.index + 1 >= self._stop):
                self._next_item()  # the shard is done: not read further, its file closed now
            else:
                self._index, self._at = sample.index + 1, sample.span[1]
            return sample
        raise StopIteration

    def get_state(self) -> State:
        return {"item": self._item, "index": self._index, "at": self._at}

    def restore(self, refs: Sequence[Ref]) -> list[Sample]:
        """The samples ``refs`` name, read again by their spans: each shard's in one pass, samples
        that follow one another in one request."""
        wanted: dict[int, list[IndexedSpan]] = {}
        for item, index, begin, end in refs:
            wanted.setdefault(item, []).append((index, begin, end))
        found: dict[tuple[int, int], Sample] = {}
        for item, spans in wanted.items():
            url = _bounds(self.items[item])[0]
            for sample in reader_for(url).reread(self.storage, url, sorted(spans), self._options):
                sample.ref = (item, sample.index, *sample.span)
                found[item, sample.index] = sample
        return [found[ref[0], ref[1]] for ref in refs]

    def close(self) -> None:
        self._close_shard()

    def _next_item(self) -> None:
        self._close_shard()
        self._item, self._index, self._at = self._item + 1, None, 0

    def _close_shard(self) -> None:
        if self._samples is not None:
            close = getattr(self._samples, "close", None)
            if close is not None:
                close()
            self._samples = None
