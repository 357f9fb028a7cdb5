"""The external-source feed of the DALI loader: our own fetcher (shard source, shard cache, tar or
per-sample objects) hands DALI batches of encoded JPEGs, labels and keys, with the same fetch
timing, storage counters and error policy as the other backends.

The loader sets the epoch (``start``), DALI iterates the feed, and for every batch DALI returns the
loader takes the matching :class:`FedBatch` from ``pending``: its stats, keys and how many samples
of the stream it used up (skipped corrupt ones included), which is what the epoch cursor counts.
"""

from __future__ import annotations

import queue
import random
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from loaders.config import LoaderConfig
from loaders.observe.stages import StageStats
from loaders.pipeline.handoff import END, in_turn, put
from loaders.pipeline.samples import SampleError, image_of, label_of, read_shards, shuffled
from loaders.plan import EpochPlan
from loaders.storage.sources import ShardSource


@dataclass
class FedBatch:
    """What the feed handed DALI for one batch, in DALI's order."""

    stats: StageStats
    keys: list[str]
    consumed: int  # positions of the reader's shuffled stream this batch used up


class Feed:
    """An iterable DALI calls ``iter()`` on at every (re)start: one epoch of batches of encoded
    JPEGs, int64 labels and keys, from our own fetcher.

    ``fetchers`` threads each stream their share of the rank's epoch (``plan(epoch)``, the even
    split of loaders.plan); samples are taken from them in round-robin order, so the sample order
    depends only on (seed, epoch, rank), and a resume can skip the delivered samples exactly.
    """

    def __init__(
        self,
        config: LoaderConfig,
        *,
        fetchers: int,
        plan: Callable[[int], EpochPlan],
    ) -> None:
        self.objects, self.fetchers, self.plan = config.layout == "objects", fetchers, plan
        self.rank, self.spec, self.source_spec = config.rank, config.pipeline, config.source
        self.epoch, self.skip = 0, 0
        self.pending: deque[FedBatch] = deque()  # handed to DALI, not yet taken by the loader
        self.leftover = StageStats()  # a dropped tail's and a trailing error's cost: read, not delivered
        self.sources: list[ShardSource] = []  # one per fetcher, kept across epochs
        self.split = "shards"

    def start(self, epoch: int, skip: int) -> None:
        """The next iteration runs ``epoch``, less its first ``skip`` samples (delivered before a resume)."""
        self.epoch, self.skip = epoch, skip

    def take_leftover(self) -> StageStats:
        out, self.leftover = self.leftover, StageStats()
        return out

    def close(self) -> None:
        for source in self.sources:
            source.close()

    def __iter__(self) -> Iterator[list]:
        return self._epoch(self.epoch, self.skip)

    def _reader(self, items: list, source: ShardSource, out: queue.Queue, stop: threading.Event) -> None:
        try:
            if self.objects:
                from loaders.formats.sample_objects import read_objects

                samples = read_objects(items, source, concurrency=source.spec.concurrency)
            else:
                samples = read_shards(items, source, self.spec)
            for sample in samples:
                if not put(out, sample, stop):
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(out, exc, stop)
        finally:
            put(out, END, stop)

    def _samples(self, epoch: int, stop: threading.Event) -> Iterator:
        queues = []
        plan = self.plan(epoch)
        self.split = plan.split
        for worker in range(self.fetchers):
            mine = list(plan.readers[worker].items)
            if len(self.sources) <= worker:
                self.sources.append(ShardSource(self.source_spec))
            q: queue.Queue = queue.Queue(maxsize=max(8, self.spec.batch_size))
            threading.Thread(
                target=self._reader,
                args=(mine, self.sources[worker], q, stop),
                daemon=True,
                name=f"dali-fetch-{worker}",
            ).start()
            queues.append(q)
        yield from in_turn(queues)

    def _epoch(self, epoch: int, skip: int) -> Iterator[list]:
        spec = self.spec
        stop = threading.Event()
        rng = random.Random(hash((spec.seed, epoch, self.rank)))
        self.pending.clear()
        stats = StageStats()
        jpegs: list[np.ndarray] = []
        labels: list[int] = []
        keys: list[str] = []
        consumed = 0
        try:
            for sample in shuffled(self._samples(epoch, stop), spec.shuffle_buffer, rng):
                stats.bytes_read += sample.read_bytes
                stats.add_time("fetch", sample.fetch_wall_s, sample.fetch_cpu_s)
                if skip > 0:  # resume: these were delivered before the state was saved
                    skip -= 1
                    stats.counters["resume_skipped_samples"] += 1
                    continue
                consumed += 1
                try:
                    label, data = label_of(sample), image_of(sample)
                    _check_jpeg(data, sample)
                except SampleError as exc:
                    if spec.on_error == "fail":
                        raise
                    stats.add_error("missing_label" if "no label" in str(exc) else "corrupt_sample", str(exc))
                    continue
                jpegs.append(np.frombuffer(data, dtype=np.uint8))
                labels.append(label)
                keys.append(sample.key)
                if len(jpegs) == spec.batch_size:
                    yield self._emit(jpegs, labels, keys, stats, consumed)
                    stats, jpegs, labels, keys, consumed = StageStats(), [], [], [], 0
            # an even split reads whole batches already: a batch short of skipped samples still goes
            if jpegs and (not spec.drop_last or self.split == "samples"):
                yield self._emit(jpegs, labels, keys, stats, consumed)
            else:
                self._drain(stats)
                self.leftover.merge(stats)  # errors and bytes of a dropped tail still count
        finally:
            stop.set()

    def _drain(self, stats: StageStats) -> None:
        for source in self.sources:
            source.drain_into(stats)

    def _emit(self, jpegs: list, labels: list, keys: list, stats: StageStats, consumed: int) -> list:
        self._drain(stats)
        stats.samples = len(jpegs)
        self.pending.append(FedBatch(stats, list(keys), consumed))
        key_arrays = [np.frombuffer(k.encode(), dtype=np.uint8) for k in keys]
        return [jpegs, [np.array(label, dtype=np.int64) for label in labels], key_arrays]


def _check_jpeg(data: bytes, sample) -> None:
    import simplejpeg

    try:
        simplejpeg.decode_jpeg_header(data)
    except ValueError as exc:
        raise SampleError(
            f"{sample.url}: sample {sample.key!r} (tar offset {sample.offset}): not a decodable JPEG ({exc})"
        ) from None
