"""The bounded shuffle buffer, as a node: memory stays at ``size`` samples whatever the dataset.

It starts yielding once it holds ``initial`` samples (default an eighth of ``size``) and reads two
samples per sample yielded until it is full, as webdataset's does: a reader's first batch (at
start-up and at every epoch) waits for a fraction of the buffer, not all of it. When the source
ends, the rest of the buffer is shuffled once and yielded in that order.

Its state is small: the samples in the buffer by their refs (read again on a reset, see
:meth:`Node.restore`), whether the source has ended, and its generator as (seed, words drawn). The
refs are kept beside the buffer as one flat array of ints, changed as the buffer changes: a state
taken after every batch (a DataLoader worker sends one with each) is then a copy of that array,
which pickles as bytes, not a list of a thousand tuples (~0.1 ms each way per batch).
"""

from __future__ import annotations

import random
from array import array
from typing import TypeVar

from loaders.pipeline.node import Node, State

T = TypeVar("T")
_SKIP_WORDS = 2**20  # words drawn per call when a resumed generator catches up


class CountingRandom(random.Random):
    """``random.Random`` with the same draws, counting the 32-bit words drawn, so that where it
    stands is two numbers (its seed, the words drawn) and a resumed one draws as many again."""

    def __init__(self, seed: int, words: int = 0) -> None:
        super().__init__(seed)
        self.words = 0
        while words > 0:  # one call per 4 MiB of words: a million draws take milliseconds
            n = min(words, _SKIP_WORDS)
            super().getrandbits(32 * n)
            self.words += n
            words -= n

    def getrandbits(self, k: int) -> int:
        self.words += (k + 31) // 32  # what CPython's generator draws for k bits
        return super().getrandbits(k)


class Shuffle(Node[T]):
    """``source``'s items through a buffer of ``size`` (1 or less: in order), drawn by a generator
    seeded with ``seed``."""

    def __init__(self, source: Node[T], size: int, seed: int, initial: int | None = None) -> None:
        self.source, self.size, self.seed = source, size, seed
        self.initial = max(1, size // 8) if initial is None else max(1, min(initial, size))
        self._buffer: list[T] = []
        self._refs = array("q")  # the buffer's items' refs, end to end, in the buffer's order
        self._drained = False  # the source has ended: the buffer is shuffled, and popped from its end
        self._rng = CountingRandom(seed)

    def reset(self, state: State | None = None) -> None:
        self._buffer, self._refs, self._drained = [], array("q"), False
        if state is None or self.size <= 1:
            self._rng = CountingRandom(self.seed)
        else:
            self._rng = CountingRandom(self.seed, state["words"])
            self._drained = state["drained"]
            flat, width = state["buffer"], state["width"]
            refs = [tuple(flat[i : i + width]) for i in range(0, len(flat), width or 1)]
            # read again before the source starts reading on: a source running in threads of its
            # own (the DALI feed's fetchers) then has none yet using its storage
            for item in self.source.restore(refs):
                self._hold(item)
        self.source.reset(None if state is None else state["source"])
        super().reset(state)

    def next(self) -> T:
        if self.size <= 1:
            return next(self.source)
        buffer, refs = self._buffer, self._refs  # the two change together, inline: once per sample
        while not self._drained:
            try:
                sample = next(self.source)
            except StopIteration:
                self._rng.shuffle(buffer)
                buffer.reverse()  # popped from the end: the shuffled order, first to last
                self._refs = array("q", [n for item in buffer for n in item.ref])  # type: ignore[attr-defined]
                self._drained = True
                break
            buffer.append(sample)
            refs.extend(sample.ref)  # type: ignore[attr-defined]
            if len(buffer) < self.size:  # still filling: one more read for this yield
                try:
                    more = next(self.source)
                except StopIteration:
                    pass  # then the next read ends the source
                else:
                    buffer.append(more)
                    refs.extend(more.ref)  # type: ignore[attr-defined]
            if len(buffer) >= self.initial:
                return self._pop(self._rng.randrange(len(buffer)))
        if not buffer:
            raise StopIteration
        return self._pop(len(buffer) - 1)

    def get_state(self) -> State:
        if self.size <= 1:
            return {"source": self.source.state_dict()}
        return {
            "words": self._rng.words,
            "drained": self._drained,
            "width": len(self._buffer[0].ref) if self._buffer else 0,  # type: ignore[attr-defined]
            "buffer": array("q", self._refs),
            "source": self.source.state_dict(),
        }

    def _hold(self, item: T) -> None:
        self._buffer.append(item)
        self._refs.extend(item.ref)  # type: ignore[attr-defined]

    def _pop(self, i: int) -> T:
        """The item at place ``i``, taken: the last item (and its ref) takes its place."""
        buffer, refs = self._buffer, self._refs
        item, last = buffer[i], len(buffer) - 1
        w = len(item.ref)  # type: ignore[attr-defined]
        if i != last:
            buffer[i] = buffer[last]
            refs[i * w : i * w + w] = refs[last * w :]
        buffer.pop()
        del refs[last * w :]
        return item
