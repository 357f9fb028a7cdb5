"""The external-source feed of the DALI loader: our own fetcher (shard source, shard cache, tar or
per-sample objects) hands DALI batches of encoded JPEGs, labels and keys, with the same fetch
timing, storage counters and error policy as the other backends.

The loader sets the epoch (``start``), DALI iterates the feed, and for every batch DALI returns the
loader takes the matching :class:`FedBatch` from ``pending``: its stats, keys and the feed's state
right after it (the fetchers' shard cursors, whose turn it is, the shuffle buffer), which is what
the epoch cursor keeps: a resumed feed goes on with the next batch.

    fetcher f (a thread): ShardSamples (or Items -> ObjectReads) of its share of the rank's epoch
    -> InTurn (one sample from each fetcher in turn) -> Shuffle -> batches of encoded JPEGs
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from loaders.config import LoaderConfig
from loaders.observe.stages import StageStats
from loaders.pipeline.in_turn import InTurn
from loaders.pipeline.items import Items
from loaders.pipeline.node import Node
from loaders.pipeline.object_reads import ObjectReads
from loaders.pipeline.samples import SampleError, image_of, label_of
from loaders.pipeline.shard_samples import ShardSamples
from loaders.pipeline.shuffle import Shuffle
from loaders.plan import EpochPlan
from loaders.storage.sources import ShardSource


@dataclass
class FedBatch:
    """What the feed handed DALI for one batch, in DALI's order."""

    stats: StageStats
    keys: list[str]
    resume: dict[str, Any]  # the feed's state right after this batch


class Feed:
    """An iterable DALI calls ``iter()`` on at every (re)start: one epoch of batches of encoded
    JPEGs, int64 labels and keys, from our own fetcher.

    ``fetchers`` threads each stream their share of the rank's epoch (``plan(epoch)``, the even
    split of loaders.plan); samples are taken from them in round-robin order, so the sample order
    depends only on (seed, epoch, rank), and a resumed feed goes on exactly where it stood.
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
        self.epoch: int = 0
        self.state: dict[str, Any] | None = None
        self.pending: deque[FedBatch] = deque()  # handed to DALI, not yet taken by the loader
        self.leftover = StageStats()  # a dropped tail's and a trailing error's cost: read, not delivered
        self.sources: list[ShardSource] = []  # one per fetcher, kept across epochs
        self.split = "shards"

    def start(self, epoch: int, state: dict[str, Any] | None) -> None:
        """The next iteration runs ``epoch``, from its start or from ``state`` (a FedBatch's ``resume``)."""
        self.epoch, self.state = epoch, state

    def take_leftover(self) -> StageStats:
        out, self.leftover = self.leftover, StageStats()
        return out

    def close(self) -> None:
        for source in self.sources:
            source.close()

    def __iter__(self) -> Iterator[list]:
        return self._epoch(self.epoch, self.state)

    def _fetcher(self, items: list, worker: int) -> Node:
        if len(self.sources) <= worker:
            self.sources.append(ShardSource(self.source_spec))
        source = self.sources[worker]
        if self.objects:
            return ObjectReads(Items(items), source, source.spec.concurrency)
        return ShardSamples(items, source, self.spec.max_member_bytes, self.spec.on_error)

    def _epoch(self, epoch: int, state: dict[str, Any] | None) -> Iterator[list]:
        spec = self.spec
        plan = self.plan(epoch)
        self.split = plan.split
        fetchers = [self._fetcher(list(plan.readers[w].items), w) for w in range(self.fetchers)]
        merged = InTurn(fetchers, max(8, spec.batch_size), name="dali-fetch")
        samples = Shuffle(merged, spec.shuffle_buffer, hash((spec.seed, epoch, self.rank)))
        samples.reset(None if state is None else state["samples"])
        self.pending.clear()
        stats = StageStats()
        jpegs: list[np.ndarray] = []
        labels: list[int] = []
        keys: list[str] = []
        try:
            for sample in samples:
                stats.bytes_read += sample.read_bytes
                stats.add_time("fetch", sample.fetch_wall_s, sample.fetch_cpu_s)
                try:
                    label, data = label_of(sample), image_of(sample)
                    _check_jpeg(data, sample)
                except SampleError as exc:
                    if spec.on_error == "fail":
                        raise
                    stats.add_error(exc.kind, str(exc))
                    continue
                jpegs.append(np.frombuffer(data, dtype=np.uint8))
                labels.append(label)
                keys.append(sample.key)
                if len(jpegs) == spec.batch_size:
                    yield self._emit(jpegs, labels, keys, stats, samples)
                    stats, jpegs, labels, keys = StageStats(), [], [], []
            # an even split reads whole batches already: a batch short of skipped samples still goes
            if jpegs and (not spec.drop_last or self.split == "samples"):
                yield self._emit(jpegs, labels, keys, stats, samples)
            else:
                self._drain(stats)
                self.leftover.merge(stats)  # errors and bytes of a dropped tail still count
        finally:
            merged.close()

    def _drain(self, stats: StageStats) -> None:
        for source in self.sources:
            source.drain_into(stats)

    def _emit(self, jpegs: list, labels: list, keys: list, stats: StageStats, samples: Shuffle) -> list:
        self._drain(stats)
        stats.samples = len(jpegs)
        self.pending.append(FedBatch(stats, list(keys), {"samples": samples.state_dict()}))
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
