"""The torchdata.nodes backend: one reader per rank, decode + augment fanned out to a pool.

    shard source (IterableWrapper: this rank's shards, read and shuffled; or its objects, in chunks)
      -> ParallelMapper(decode + augment a chunk of samples; threads, or method="process")
      -> full batches + collate
      -> Prefetcher -> PinMemory (only with CUDA: it asserts on CPU-only torch) -> Loader

Threads are the default because simplejpeg and OpenCV release the GIL while they work. The mapper
takes CHUNK samples at a time: its hand-over between threads costs ~55 µs of CPU per item here, most
of it under the GIL, which per sample would be a twentieth of the decode itself. The steps
are the pipeline's own (``read_shards``/``read_objects``, ``shuffled``, ``process_sample``,
``BatchAssembler``) with the same stage timers and error policy, so a sweep compares the backends
and not two implementations. With the same seed the batches equal the DataLoader backend's with
``workers=0`` (one reader, same shard order, same shuffle, same crops), whatever the thread count.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import numpy as np
import torch
from torchdata.nodes import BaseNode, IterableWrapper, ParallelMapper, PinMemory, Prefetcher
from torchdata.nodes import Loader as NodesRunner

from loaders.backends.skeleton import BaseLoader
from loaders.formats.tar import Sample
from loaders.observe.stages import StageStats
from loaders.pipeline.assemble import Batch, BatchAssembler
from loaders.pipeline.samples import PipelineSpec, process_sample, raw_samples, sample_rng
from loaders.storage.sources import ShardSource

Processed = tuple[tuple[np.ndarray, int, str] | None, StageStats]
CHUNK = 8  # samples per mapper task: the hand-over is paid once per 8 samples


class _ChunkWorker:
    """decode + augment of a chunk of samples, in order; picklable, so it also runs in mapper
    processes."""

    def __init__(self, spec: PipelineSpec, base: int) -> None:
        self.spec, self.base = spec, base

    def __call__(self, chunk: list[Sample]) -> list[Processed]:
        _one_torch_thread()
        done = []
        for sample in chunk:
            stats = StageStats()  # one per sample: threads never share a counter
            done.append((process_sample(sample, self.spec, sample_rng(self.base, sample), stats), stats))
        return done


_threads_set = False


def _one_torch_thread() -> None:
    # in a mapper process: the pool is the parallelism (torch's intra-op pool only slows small ops)
    global _threads_set
    if not _threads_set:
        torch.set_num_threads(1)
        _threads_set = True


class _FullBatches(BaseNode[Batch]):
    """Batcher + collate in one node, with the DataLoader backend's rule: a skipped sample does not
    shorten a batch (the next good one fills its place), and its counters ride with the batch.
    ``planned``: the batches this epoch must yield (even split); skipped samples that leave the
    stream short are made up with empty batches, so every rank takes the same number of steps."""

    def __init__(
        self,
        source: BaseNode[list[Processed]],
        spec: PipelineSpec,
        drain: Callable[[StageStats], None],
        planned: int | None = None,
    ) -> None:
        super().__init__()
        self.source, self.spec, self.drain, self.planned = source, spec, drain, planned
        self.first: StageStats | None = None
        self.made = 0
        self._done = False
        # one sample at a time; a chunk that fills a batch leaves its rest for the next one
        self._samples: Iterator[Processed] = itertools.chain.from_iterable(source)

    def reset(self, initial_state: dict | None = None) -> None:
        super().reset(initial_state)
        self.source.reset(initial_state["source"] if initial_state else None)
        self._done = False
        self.made = 0
        self._samples = itertools.chain.from_iterable(self.source)

    def get_state(self) -> dict:
        # resume goes through NodesLoader.state_dict (per-sample counts), not through this state
        return {"source": self.source.state_dict()}

    def next(self) -> Batch:
        if self._done:
            if self.planned is not None and self.made < self.planned:
                self.made += 1
                return Batch.empty(self.spec.image_size)
            raise StopIteration
        batch = BatchAssembler(self.spec.batch_size, self.spec.image_size, stats=self.first)
        self.first = None
        while not batch.full:
            try:
                out, sample_stats = next(self._samples)
            except StopIteration:
                self._done = True
                break
            batch.consumed += 1
            batch.stats.merge(sample_stats)
            if out is not None:
                batch.add(*out)
        self.drain(batch.stats)
        finished = batch.take(drop_partial=self.spec.drop_last)
        if finished is None:
            return self.next()  # nothing left: made up to the plan, or the end
        self.made += finished.delivers
        return finished


class NodesLoader(BaseLoader):
    """torchdata.nodes backend of :func:`loaders.make_loader` (name "nodes").

    ``config.workers`` mapper threads (or processes with ``options={"method": "process"}``) decode
    and augment; ``config.prefetch`` finished batches wait in the Prefetcher. ``workers=0`` maps in
    one thread. One reader per rank (the graph's source): its plan, len(), resume and stats are the
    skeleton's (:class:`loaders.backends.BaseLoader`); resume skips, without decoding, the samples of
    this rank's shuffled stream the consumer already received.
    """

    backend = "nodes"

    def _epoch(self, epoch: int, skip: list[int], done: list[int]) -> Iterator[Batch]:
        # the mapping threads belong to this process: one intra-op thread, as in DataLoader workers
        torch.set_num_threads(1)
        runner, source = self._graph(epoch, skip[0], done[0])
        try:
            yield from runner
        finally:
            source.close()

    def _graph(self, epoch: int, skip: int, done: int) -> tuple[NodesRunner, ShardSource]:
        cfg = self.config
        objects = cfg.layout == "objects"
        plan = self.plan(epoch)
        mine = list(plan.readers[0].items)
        # several ranks must step alike: skipped samples are made up with empty batches
        planned = plan.batches - done if plan.split == "samples" else None
        spec = self.spec if plan.split == "shards" else replace(self.spec, drop_last=False)
        # the same reader seed as DataLoader worker 0 of 1, so the two backends agree sample for sample
        rng = random.Random(hash((self.spec.seed, epoch, cfg.rank, 0)))
        source = ShardSource(cfg.source)
        first = StageStats()
        samples = _Replayable(mine, source, self.spec, rng, objects, skip, first)
        base = rng.getrandbits(64)
        node: BaseNode = IterableWrapper(_Chunks(samples, CHUNK))
        node = ParallelMapper(
            node,
            _ChunkWorker(spec, base),
            num_workers=max(1, cfg.workers),
            in_order=True,  # shuffling is the shuffle buffer's job; order keeps resume exact
            method=cfg.options["method"],
        )
        batcher = _FullBatches(node, spec, source.drain_into, planned)
        batcher.first = first
        node = Prefetcher(batcher, prefetch_factor=max(1, cfg.prefetch))
        if torch.cuda.is_available():
            node = PinMemory(node)
        return NodesRunner(node, restart_on_stop_iteration=False), source


class _Chunks:
    """An iterable's items in lists of ``size``; iterable again whenever the underlying one is."""

    def __init__(self, items: Iterable, size: int) -> None:
        self.items, self.size = items, size

    def __iter__(self) -> Iterator[list]:
        items = iter(self.items)
        while chunk := list(itertools.islice(items, self.size)):
            yield chunk


class _Replayable:
    """The rank's raw sample stream as an iterable, built when the graph first pulls from it."""

    def __init__(
        self,
        items: list,
        source: ShardSource,
        spec: PipelineSpec,
        rng: random.Random,
        objects: bool,
        skip: int,
        skipped: StageStats,
    ) -> None:
        self.args = (items, source, spec)
        self.objects, self.skip, self.skipped = objects, skip, skipped
        self._rng = random.Random()
        self._rng.setstate(rng.getstate())
        # raw_samples draws the shuffle seed first: advance the caller's rng the same way now, so the
        # augmentation base it draws next is the DataLoader backend's (same samples, same crops)
        rng.getrandbits(64)
        self.iterations = 0

    def __iter__(self) -> Iterator[Sample]:
        # a fresh stream on every iter(): torchdata may reset a node more than once
        self.iterations += 1
        rng = random.Random()
        rng.setstate(self._rng.getstate())
        return raw_samples(*self.args, rng, objects=self.objects, skip=self.skip, skipped=self.skipped)
