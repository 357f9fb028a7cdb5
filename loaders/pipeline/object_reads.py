"""One object per sample, read with ``concurrency`` reads in flight ahead of the pipeline: the
objects layout's reading stage (its items come shuffled: nothing is read before its turn).

Its state is the reads in flight (by their items' refs, asked for again on a reset) and its source's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from loaders.formats.base import Ref, Sample
from loaders.formats.sample_objects import InFlight
from loaders.pipeline.items import Listed
from loaders.pipeline.node import Node, State

if TYPE_CHECKING:
    from loaders.storage.sources import ShardSource


class ObjectReads(Node[Sample]):
    def __init__(self, source: Node[Listed], storage: ShardSource, concurrency: int) -> None:
        self.source, self.storage, self.concurrency = source, storage, concurrency
        self._reads: InFlight | None = None
        self._filled = False

    def reset(self, state: State | None = None) -> None:
        self._close_reads()
        self.source.reset(None if state is None else state["source"])
        self._reads = InFlight(self.storage, self.concurrency)
        if state is not None:
            for listed in self.source.restore([tuple(ref) for ref in state["pending"]]):
                self._reads.ask(listed.item, listed.ref)
        self._filled = False
        super().reset(state)

    def next(self) -> Sample:
        reads = self._reads
        assert reads is not None
        if not self._filled:  # the first reads go out together
            while len(reads) < reads.concurrency and self._ask():
                pass
            self._filled = True
        if not reads:
            raise StopIteration
        sample = reads.take()
        self._ask()  # one more in flight while this one is decoded
        return sample

    def get_state(self) -> State:
        pending = [] if self._reads is None else [ref for _, ref, _, _ in self._reads.pending]
        return {"pending": pending, "source": self.source.state_dict()}

    def restore(self, refs: Sequence[Ref]) -> list[Sample]:
        reads = InFlight(self.storage, self.concurrency)
        try:
            for listed in self.source.restore(refs):
                reads.ask(listed.item, listed.ref)
            return [reads.take() for _ in refs]
        finally:
            reads.close()

    def close(self) -> None:
        self._close_reads()
        self.source.close()

    def _ask(self) -> bool:
        assert self._reads is not None
        listed = next(self.source, None)
        if listed is None:
            return False
        self._reads.ask(listed.item, listed.ref)
        return True

    def _close_reads(self) -> None:
        if self._reads is not None:
            self._reads.close()
            self._reads = None
