"""The torchdata.nodes backend: one reader per rank, decode + augment fanned out to a pool.

    ShardSamples (this rank's shards; or Items -> Shuffle -> ObjectReads for its objects)
      -> Shuffle -> torchdata Batcher (a batch's worth of samples per task)
      -> ParallelMapper(decode + augment a task's samples straight into a batch; threads, or
         method="process")
      -> Batcher (hands on each full batch; the batch fill after a skipped sample) -> Prefetcher
      -> PinMemory (only with CUDA: it asserts on CPU-only torch) -> Loader

The stages are the pipeline's own nodes (loaders/pipeline), composed with torchdata's as they
are: the same stages, stage timers, error policy and seeds as the other backends, so a sweep
compares the backends and not two implementations. With the same seed the batches equal the
DataLoader backend's with ``workers=0`` (one reader, same shard order, same shuffle, same crops),
whatever the thread count.

Threads are the default because simplejpeg, the region decoder and OpenCV release the GIL while
they work. A mapper task is a batch's worth of samples, decoded and augmented into the slots of a
batch of its own, as a DataLoader worker or a reader thread fills its batch: the mapper's
hand-over between threads (~55 µs of CPU per item here, most of it under the GIL) is paid once a
batch, and a full batch is handed on without a copy (copying each image into the batch after
another thread made it cost ~45 µs of CPU a sample, under the GIL, measured here). A skipped
sample leaves its task's batch short: its samples then fill the batch fill one by one, the rest
waiting in the batcher for the next batch (its state names them, so a resumed loader decodes them
again; the mapper's own state, snapshot after each task it hands on, resumes after them).
"""

from __future__ import annotations

from collections.abc import Generator

import torch
from torchdata.nodes import BaseNode, ParallelMapper, PinMemory, Prefetcher
from torchdata.nodes import Batcher as Tasks

from loaders.backends.skeleton import BaseLoader
from loaders.config import PipelineSpec
from loaders.formats.base import Sample
from loaders.pipeline.batch import Batch
from loaders.pipeline.batcher import Assembled, Batcher, Share
from loaders.pipeline.reader import raw_samples, reader_rng, reader_spec
from loaders.storage.sources import ShardSource


class _AssembleBatch:
    """decode + augment of a task's samples, in order, into a batch of its own; picklable, so it
    also runs in mapper processes."""

    def __init__(self, spec: PipelineSpec, seed: int) -> None:
        self.spec, self.seed = spec, seed

    def __call__(self, samples: list[Sample]) -> Assembled:
        _one_torch_thread()
        return Assembled.make(samples, self.spec, self.seed)


def _handed_on(state: dict, layers: int) -> dict:
    """The state of ``layers`` torchdata prefetching nodes (Prefetcher, PinMemory) over our batcher
    right after they handed on the batch after which the batcher's state was ``state``."""
    for _ in range(layers):
        state = {"snapshot": state, "steps_since_snapshot": 0}
    return state


_threads_set = False


def _one_torch_thread() -> None:
    # in a mapper process: the pool is the parallelism (torch's intra-op pool only slows small ops)
    global _threads_set
    if not _threads_set:
        torch.set_num_threads(1)
        _threads_set = True


class NodesLoader(BaseLoader):
    """torchdata.nodes backend of :func:`loaders.make_loader` (name "nodes").

    ``config.workers`` mapper threads (or processes with ``options={"method": "process"}``) decode
    and augment; ``config.prefetch`` finished batches wait in the Prefetcher. ``workers=0`` maps in
    one thread. One reader per rank (the graph's source): its plan, len(), resume and stats are the
    skeleton's (:class:`loaders.backends.BaseLoader`); resume resets the graph to the batcher's
    state after the last batch the consumer received.
    """

    backend = "nodes"

    def _epoch(self, epoch: int, resumed: list[dict | None] | None) -> Generator[Batch, None, None]:
        # the mapping threads belong to this process: one intra-op thread, as in DataLoader workers
        torch.set_num_threads(1)
        source = ShardSource(self.config.source)
        node: BaseNode = Prefetcher(self._graph(epoch, source), prefetch_factor=max(1, self.config.prefetch))
        layers = 1
        if torch.cuda.is_available():
            node, layers = PinMemory(node), 2
        state = None if resumed is None else resumed[0]
        node.reset(None if state is None else _handed_on(state, layers))
        try:
            yield from node
        finally:
            source.close()

    def _graph(self, epoch: int, source: ShardSource) -> Batcher:
        cfg = self.config
        plan = self.plan(epoch)
        spec = reader_spec(cfg, plan)
        # reader 0 of 1: the DataLoader backend's worker 0's seeds, so the two agree sample for sample
        rng = reader_rng(self.spec.seed, epoch, plan.rank, 0)
        samples = raw_samples(list(plan.readers[0].items), source, spec, rng, objects=cfg.layout == "objects")
        seed = rng.getrandbits(64)
        mapped = ParallelMapper(
            Tasks(samples, spec.batch_size, drop_last=False),
            _AssembleBatch(spec, seed),
            num_workers=max(1, cfg.workers),
            in_order=True,  # shuffling is the shuffle buffer's job; order keeps resume exact
            method=cfg.options["method"],
        )
        # several ranks must step alike: skipped samples are made up with empty batches
        owed = plan.readers[0].batches if plan.split == "samples" else None
        return Batcher(
            mapped, spec, seed, share=Share(0, epoch, owed), drain=source.drain_into, restore=samples.restore
        )
