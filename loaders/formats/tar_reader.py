"""The tar (WebDataset) format's reader (the table of formats names it for ``.tar``): a whole shard
front to back, a part of one (by byte range from its index when most of it is other readers'), a
shard resumed at a saved byte, and samples read again by their spans."""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence

from loaders.formats.base import (
    DEFAULT_OPTIONS,
    WHOLE_SHARD,
    Extent,
    IndexedSpan,
    Opener,
    ReadOptions,
    Sample,
    ShardFormatError,
    charged,
    local_path,
)
from loaders.formats.tar import BLOCK, Gap, count_tar_samples, iter_samples
from loaders.formats.tar_index import (
    ArchiveRange,
    Members,
    ShardIndexError,
    byte_range,
    iter_range_samples,
    load_index,
)
from loaders.observe.losses import Loss
from loaders.observe.stages import clocks, since

Lost = Callable[[Loss], None]


class TarReader:
    """:class:`loaders.formats.base.ShardReader` for tar shards."""

    def read(
        self, source: Opener, url: str, extent: Extent = WHOLE_SHARD, options: ReadOptions = DEFAULT_OPTIONS
    ) -> Iterator[Sample]:
        if extent.empty:
            return iter(())
        if extent.ranged:
            return _by_index(source, url, extent, options)
        return _stream(
            source, url, extent, options.max_member_bytes, _Gaps(source, url, extent, options.lost)
        )

    def reread(
        self, source: Opener, url: str, spans: Sequence[IndexedSpan], options: ReadOptions = DEFAULT_OPTIONS
    ) -> Iterator[Sample]:
        for run in _adjacent(spans):
            (first, begin, _), end = run[0], run[-1][2]
            clock = clocks()
            with source.open(url, begin, end) as raw:
                wall, cpu = since(clock)
                ranged = ArchiveRange(raw, url, begin, end, placed="a saved position places samples")
                got = list(
                    charged(
                        iter_samples(ranged, url, options.max_member_bytes, at=begin, first=first), wall, cpu
                    )
                )
            if [(s.index, *s.span) for s in got] != list(run):
                raise ShardFormatError(
                    url,
                    begin,
                    "the shard's samples are not where a saved position found them (rewritten since?)",
                )
            ranged.uncount(got[-1])
            yield from got

    def count(self, path: str) -> int:
        return count_tar_samples(path)


def _stream(source: Opener, url: str, extent: Extent, max_member_bytes: int, gaps: _Gaps) -> Iterator[Sample]:
    """Samples [start, stop) of ``extent`` read front to back: from byte ``at`` where sample ``start`` begins
    when it is known, else from the shard's start, the samples before ``start`` read but not
    yielded (their bytes and time charged to sample ``start``). Reading stops after ``stop - 1``:
    the rest of the shard is another reader's, and not even read."""
    start, stop, at = extent.start, extent.stop, extent.at
    clock = clocks()
    with source.open(url, at) as raw:
        wall, cpu = since(clock)
        samples = iter_samples(raw, url, max_member_bytes, at=at, first=start if at else 0, resync=gaps)
        if start and not at:
            samples = _from(samples, start)
        for sample in charged(samples, wall, cpu):
            yield sample
            if stop is not None and sample.index + 1 >= stop:
                return


def _from(samples: Iterator[Sample], start: int) -> Iterator[Sample]:
    carried = [0, 0.0, 0.0]
    for sample in samples:
        if sample.index < start:  # another reader's: the bytes came off the storage all the same
            carried[0] += sample.read_bytes
            carried[1] += sample.fetch_wall_s
            carried[2] += sample.fetch_cpu_s
            continue
        sample.read_bytes += int(carried[0])
        sample.fetch_wall_s += carried[1]
        sample.fetch_cpu_s += carried[2]
        carried = [0, 0.0, 0.0]
        yield sample


def _by_index(source: Opener, url: str, extent: Extent, options: ReadOptions) -> Iterator[Sample]:
    """Samples [start, stop) of ``extent`` by byte range from the shard's index (read, and charged, with the
    first sample)."""
    clock = clocks()
    index = load_index(url, source.read_object)
    start, stop = extent.start, len(index) if extent.stop is None else extent.stop
    begin, end = byte_range(index, url, start, stop)
    size = source.spec.shard_sizes.get(url)
    if size is not None and end > size:
        raise ShardIndexError(
            url, f"its index places members up to byte {end}, but the shard has {size} (stale index)"
        )
    gaps = _Gaps(source, url, Extent(start, stop), options.lost, index)
    with source.open(url, begin, end) as raw:
        wall, cpu = since(clock)
        yield from charged(
            iter_range_samples(raw, url, index, start, stop, options.max_member_bytes, gaps), wall, cpu
        )


class _Gaps:
    """How a read of samples ``[start, stop)`` of a shard (its ``extent``) goes on past damage (a
    :class:`loaders.formats.tar.Resync`): by the shard's index where it has one (read on the first
    damage, if not given), each gap told to ``lost`` as the samples of this read it held; with
    ``lost`` None damage is a ShardFormatError."""

    def __init__(
        self,
        source: Opener,
        url: str,
        extent: Extent,
        lost: Lost | None,
        index: list[Members] | None = None,
    ) -> None:
        self.source, self.url, self.lost = source, url, lost
        self.start, self.stop = extent.start, extent.stop
        self._index, self._starts = index, None if index is None else _starts(index)
        self._asked = index is not None

    @property
    def skips(self) -> bool:
        return self.lost is not None

    def landmarks(self) -> list[int] | None:
        if not self._asked:
            self._asked = True
            try:
                self._index = load_index(self.url, self.source.read_object)
                self._starts = _starts(self._index)
            except (ShardFormatError, OSError):  # no index (or none readable): scan for headers
                self._index = None
        return self._starts

    def size(self) -> int | None:
        known = self.source.spec.shard_sizes.get(self.url)
        path = local_path(self.url)
        if known is None and path is not None:
            with contextlib.suppress(OSError):
                known = os.stat(path).st_size
        return known

    def found(self, gap: Gap, current: Sample | None, upcoming: int) -> tuple[bool, int]:
        starts, index = self.landmarks(), self._index
        if starts is None or index is None:
            whole, after, first, count = True, upcoming, upcoming, None
        else:
            after = len(starts) if gap.final else bisect.bisect_left(starts, gap.end)
            whole = current is not None and _matches(current, index)
            first = (
                current.index if current is not None and not whole else bisect.bisect_left(starts, gap.begin)
            )
            top = after if self.stop is None else min(after, self.stop)
            first = max(first, self.start)
            count = max(0, top - first)
        end = gap.end
        if gap.final:  # cut short: what is lost runs to where the shard should have ended
            end = max(end, self.source.spec.shard_sizes.get(self.url, end))
        if count != 0 and self.lost is not None:
            self.lost(Loss(self.url, gap.begin, end, count, first, gap.problem))
        return whole, after


def _starts(index: list[Members]) -> list[int]:
    """Where each sample's first header is, from the index (a member's data follows its header)."""
    return [members[0][1] - BLOCK for members in index]


def _matches(sample: Sample, index: list[Members]) -> bool:
    """Whether ``sample`` has every member its index lists, at their sizes."""
    if not 0 <= sample.index < len(index):
        return False
    return {ext: len(data) for ext, data in sample.parts.items()} == {e: n for e, _, n in index[sample.index]}


def _adjacent(spans: Sequence[IndexedSpan]) -> Iterator[list[IndexedSpan]]:
    """The spans in runs of samples that follow one another in the shard: one read each."""
    run: list[IndexedSpan] = []
    for span in spans:
        if run and (span[0] != run[-1][0] + 1 or span[1] != run[-1][2]):
            yield run
            run = []
        run.append(span)
    if run:
        yield run
