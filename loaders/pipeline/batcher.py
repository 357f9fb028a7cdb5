"""Samples into batches, as a node: the batch fill. A sample from the stream is decoded and
augmented straight into its slot of the batch; a mapper task's batch (:class:`Assembled`, made the
same way in a mapper thread from a batch's worth of samples) is handed on as it is when it is full
and lines up with the batch begun here, else its samples are copied in one by one. A skipped
sample does not shorten a batch (the next good one fills its place) and its counters ride with
the batch. Each batch is stamped with when it was begun and finished and carries, in
its bookkeeping, this node's state right after it: a reader reset from that state goes on with the next
batch, reading again only samples it had taken but not delivered (the rest of a mapper's chunk).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loaders.config import PipelineSpec
from loaders.formats.base import Ref, Sample
from loaders.observe.stages import StageStats
from loaders.pipeline.assemble import BatchAssembler, BatchBuffers
from loaders.pipeline.batch import Batch, Bookkeeping
from loaders.pipeline.node import Node, State
from loaders.pipeline.samples import Decoded, process_sample, sample_rng


def fill(batch: BatchAssembler, sample: Sample, spec: PipelineSpec, seed: int) -> bool:
    """``sample`` decoded and augmented into ``batch``'s next slot (read without decoding: its byte
    length), its counters into the batch's; False for a sample skipped under the error policy."""
    slot = batch.slot() if spec.decode else None
    out = process_sample(sample, spec, sample_rng(seed, sample), batch.stats, slot)
    if out is None:
        return False
    if spec.decode:
        batch.commit(out[1], out[2])  # the image is already in its slot
    else:
        batch.add(*out)
    return True


@dataclass
class Assembled:
    """A batch made from consecutive samples of the stream away from the batcher (a mapper task):
    ``batch`` holds those not skipped, in order; ``taken``: every sample taken, in order, as (ref,
    read, whether it is in the batch)."""

    batch: BatchAssembler
    taken: list[tuple[Ref, tuple[float, float] | None, bool]]

    @classmethod
    def make(cls, samples: Sequence[Sample], spec: PipelineSpec, seed: int) -> Assembled:
        batch = BatchAssembler(spec.batch_size, spec.image_size)
        taken = [(sample.ref, sample.read, fill(batch, sample, spec, seed)) for sample in samples]
        return cls(batch, taken)

    def one_by_one(self) -> list[Decoded]:
        """Its samples apart, in order (the images: views of its buffer); the first carries the
        counters of all of them."""
        batch, delivered = self.batch, 0
        items = []
        for i, (ref, read, kept) in enumerate(self.taken):
            out = None
            if kept:
                image = batch.slot_view(delivered) if batch.image_size is not None else batch.sizes[delivered]
                out = (image, batch.labels[delivered], batch.keys[delivered])
                delivered += 1
            items.append(Decoded(out, batch.stats if i == 0 else StageStats(), ref, read))
        return items


@dataclass(frozen=True)
class Share:
    """Whose batches these are: reader ``reader``'s of ``epoch``; ``batches``: how many it must
    yield (an even split: skipped samples that leave it short are made up with empty batches, so
    every rank steps alike), None where its count is what its samples make."""

    reader: int = 0
    epoch: int = 0
    batches: int | None = None


class Batcher(Node[Batch]):
    """Batches of ``spec.batch_size`` from ``source`` (samples, or :class:`Assembled` batches from a
    mapper). ``seed``: the augmentation draws' (per sample: :func:`sample_rng`). ``buffers``: where
    image buffers live; ``drain`` moves the storage counters gathered meanwhile into each batch;
    ``alive`` false ends the stream at the next sample (a stream its loader abandoned); ``restore``
    reads samples again by ref (default the source's)."""

    def __init__(
        self,
        source: Node,
        spec: PipelineSpec,
        seed: int,
        *,
        share: Share = Share(),
        buffers: BatchBuffers | None = None,
        drain: Callable[[StageStats], None] | None = None,
        alive: Callable[[], bool] | None = None,
        restore: Callable[[Sequence[Ref]], list[Sample]] | None = None,
    ) -> None:
        self.source, self.spec, self.seed, self.share = source, spec, seed, share
        self.buffers, self.drain, self.alive = buffers, drain, alive
        self._restore = restore or source.restore
        self._pending: deque[Sample | Decoded] = deque()  # taken from the source, in no batch yet
        self._ended = False
        self._state: State | None = None
        self.made = 0  # batches delivered (to the consumer) this epoch

    def reset(self, state: State | None = None) -> None:
        self._pending.clear()
        self._ended, self._state = False, None
        self.made = 0 if state is None else state["made"]
        if state is not None and state["pending"]:
            self._pending.extend(self._restore([tuple(ref) for ref in state["pending"]]))
        self.source.reset(None if state is None else state["source"])
        self._pull = self.source.next  # reset: pulled directly, one call layer less per sample
        super().reset(state)

    def next(self) -> Batch:
        # the stream ended with the batch before: only batches still owed to the even split follow
        # (storage counters drained at every call would otherwise make a counters-only batch forever)
        if self._ended and not self._owed():
            raise StopIteration
        begun = time.perf_counter()
        self._state = None
        spec = self.spec
        batch = BatchAssembler(spec.batch_size, spec.image_size, buffers=self.buffers)
        reads: list[tuple[float, float]] = []  # each sample's read: when asked for, when its bytes were in
        while not batch.full and not self._ended:
            item = self._take()
            if item is None:
                self._ended = True
                break
            if isinstance(item, Assembled):
                if len(batch) == 0 and item.batch.full:
                    item.batch.stats.merge(batch.stats)  # what samples skipped before it counted
                    batch = item.batch  # made whole in the mapper: handed on without a copy
                    reads += [read for _, read, _ in item.taken if read is not None]
                else:
                    self._pending.extend(item.one_by_one())
                continue
            if item.read is not None:
                reads.append(item.read)
            if isinstance(item, Decoded):
                batch.stats.merge(item.stats)
                if item.out is not None:
                    batch.add(*item.out)
                continue
            fill(batch, item, spec, self.seed)
        if self.drain is not None:
            self.drain(batch.stats)
        made = batch.take(drop_partial=spec.drop_last and not batch.full)
        if made is None or (self._ended and not made.delivers and self._owed()):
            if not self._owed():
                raise StopIteration
            # skipped samples left this reader short; the counters of a dropped tail go with it
            made = Batch.empty(spec.image_size, Bookkeeping(made.stats if made is not None else StageStats()))
        self.made += made.delivers
        made.bookkeeping = Bookkeeping(
            made.bookkeeping.stats,
            self.share.reader,
            self.share.epoch,
            (begun, time.perf_counter()),
            tuple(reads) or None,
            self.get_state(),
        )
        return made

    def get_state(self) -> State:
        if self._state is None:
            self._state = {
                "made": self.made,
                "pending": [item.ref for item in self._pending],
                "source": self.source.state_dict(),
            }
        return self._state

    def _owed(self) -> bool:
        """Whether this reader still owes batches to its share of an even split."""
        return self.share.batches is not None and self.made < self.share.batches and self._alive()

    def _alive(self) -> bool:
        return self.alive is None or self.alive()

    def _take(self) -> Any:
        """The next sample (or decoded sample) of the stream, None at its end or once not alive."""
        if self.alive is not None and not self.alive():
            return None
        if self._pending:
            return self._pending.popleft()
        try:
            item = self._pull()
        except StopIteration:
            return None
        return item
