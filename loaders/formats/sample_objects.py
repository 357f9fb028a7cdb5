"""One object per sample (~110 KB JPEGs) instead of tar shards: many small reads, kept in flight.

Small-object GETs behave very differently from shard streams — per-request latency, not
bandwidth, sets the pace — so a reader keeps ``concurrency`` requests in flight and the fetch
stage is the time the reader actually waited for the next sample's bytes. Each sample also
carries when its read was asked for and when its bytes were in: the reads run ahead of the decode
(on while the worker waits to be asked for a batch), which iobench's scale model replays.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from loaders.formats.tar import Sample
from loaders.observe.stages import clocks, since
from loaders.storage.sources import ShardSource

SampleObject = tuple[str, str, int]  # (key, url, label)


def _read_timed(source: ShardSource, url: str) -> tuple[bytes, float]:
    data = source.read_object(url)
    return data, time.perf_counter()


def read_objects(
    items: Sequence[SampleObject], source: ShardSource, concurrency: int = 16
) -> Iterator[Sample]:
    """Yield the samples in ``items`` order, with up to ``concurrency`` object reads in flight."""
    todo = iter(items)
    pending: deque[tuple[SampleObject, float, Future]] = deque()
    with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="iobench-obj") as pool:

        def submit() -> bool:
            item = next(todo, None)
            if item is None:
                return False
            pending.append((item, time.perf_counter(), pool.submit(_read_timed, source, item[1])))
            return True

        while len(pending) < concurrency and submit():
            pass
        while pending:
            (key, url, label), asked, future = pending.popleft()
            start = clocks()
            data, done = future.result()  # a failed read raises here, with the URL in its message
            submit()
            ext = url.rsplit(".", 1)[-1].lower() if "." in url.rsplit("/", 1)[-1] else "jpg"
            yield Sample(
                key=key,
                url=url,
                offset=0,
                parts={ext: data, "cls": str(label).encode()},
                read_bytes=len(data),
                fetch_wall_s=(fetched := since(start))[0],
                fetch_cpu_s=fetched[1],
                read=(asked, done),
            )
