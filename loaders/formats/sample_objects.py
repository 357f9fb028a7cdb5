"""One object per sample (~110 KB JPEGs) instead of tar shards: many small reads, kept in flight.

Small-object GETs behave very differently from shard streams — per-request latency, not
bandwidth, sets the pace — so a reader keeps ``concurrency`` requests in flight and the fetch
stage is the time the reader actually waited for the next sample's bytes. Each sample also
carries when its read was asked for and when its bytes were in: the reads run ahead of the decode
(on while the worker waits to be asked for a batch), which iobench's scale model replays.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from loaders.formats.base import Opener, Ref, Sample
from loaders.observe.stages import clocks, since

SampleObject = tuple[str, str, int]  # (key, url, label)


def _read_timed(source: Opener, url: str) -> tuple[bytes, float]:
    data = source.read_object(url)
    return data, time.perf_counter()


class InFlight:
    """Object reads in flight, taken in the order they were asked for: ``ask`` an object (with the
    pipeline's ref for it), ``take`` the oldest one's sample once its bytes are in."""

    def __init__(self, source: Opener, concurrency: int) -> None:
        self.source, self.concurrency = source, max(1, concurrency)
        self.pending: deque[tuple[SampleObject, Ref, float, Future]] = deque()
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="iobench-obj")
        # a reader dropped without close() (a pipeline left to the garbage collector) ends its threads
        weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)

    def __len__(self) -> int:
        return len(self.pending)

    def ask(self, item: SampleObject, ref: Ref = ()) -> None:
        self.pending.append(
            (item, ref, time.perf_counter(), self._pool.submit(_read_timed, self.source, item[1]))
        )

    def take(self) -> Sample:
        (key, url, label), ref, asked, future = self.pending.popleft()
        start = clocks()
        data, done = future.result()  # a failed read raises here, with the URL in its message
        wall, cpu = since(start)
        ext = url.rsplit(".", 1)[-1].lower() if "." in url.rsplit("/", 1)[-1] else "jpg"
        return Sample(
            key=key,
            url=url,
            offset=0,
            parts={ext: data, "cls": str(label).encode()},
            read_bytes=len(data),
            fetch_wall_s=wall,
            fetch_cpu_s=cpu,
            read=(asked, done),
            span=(0, len(data)),
            ref=ref,
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.pending.clear()


def read_objects(items: Sequence[SampleObject], source: Opener, concurrency: int = 16) -> Iterator[Sample]:
    """Yield the samples in ``items`` order, with up to ``concurrency`` object reads in flight."""
    todo = iter(items)
    reads = InFlight(source, concurrency)
    try:
        for item in todo:
            reads.ask(item)
            if len(reads) == reads.concurrency:
                break
        while reads:
            sample = reads.take()
            more = next(todo, None)
            if more is not None:
                reads.ask(more)
            yield sample
    finally:
        reads.close()
