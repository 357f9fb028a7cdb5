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

from loaders.pipeline.node import Node, Referenced, State

R = TypeVar("R", bound=Referenced)
_SKIP_WORDS = 2**20  # words drawn per call when a resumed generator catches up


class Draws:
    """The shuffle's draws: those of ``random.Random(seed)``'s ``randrange`` and ``shuffle`` (CPython
    draws below n by rejection: getrandbits(n.bit_length()) until under n), made here with the
    32-bit words they take counted, so that where the generator stands is two numbers (its seed,
    the words drawn) and a resumed one draws as many again."""

    def __init__(self, seed: int, words: int = 0) -> None:
        self._draws = random.Random(seed)
        self._bits = self._draws.getrandbits
        self.words = 0
        while words > 0:  # one call per 4 MiB of words: a million take milliseconds
            n = min(words, _SKIP_WORDS)
            self._bits(32 * n)
            self.words += n
            words -= n

    def below(self, n: int) -> int:
        """``randrange(n)``: an int in [0, n)."""
        k = n.bit_length()
        per = (k + 31) // 32  # words a draw of k bits takes
        r = self._bits(k)
        self.words += per
        while r >= n:
            r = self._bits(k)
            self.words += per
        return r

    def shuffle(self, items: list) -> None:
        """``random.shuffle(items)``: Fisher-Yates from the end."""
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


class Shuffle(Node[R]):
    """``source``'s items through a buffer of ``size`` (1 or less: in order), drawn by a generator
    seeded with ``seed``."""

    def __init__(self, source: Node[R], size: int, seed: int, initial: int | None = None) -> None:
        self.source, self.size, self.seed = source, size, seed
        self.initial = max(1, size // 8) if initial is None else max(1, min(initial, size))
        self._buffer: list[R] = []
        self._refs = array("q")  # the buffer's items' refs, end to end, in the buffer's order
        self._drained = False  # the source has ended: the buffer is shuffled, and popped from its end
        self._draws = Draws(seed)

    def reset(self, state: State | None = None) -> None:
        self._buffer, self._refs, self._drained = [], array("q"), False
        if state is None or self.size <= 1:
            self._draws = Draws(self.seed)
        else:
            self._draws = Draws(self.seed, state["words"])
            self._drained = state["drained"]
            flat, width = state["buffer"], state["width"]
            refs = [tuple(flat[i : i + width]) for i in range(0, len(flat), width or 1)]
            # read again before the source starts reading on: a source running in threads of its
            # own (the DALI feed's fetchers) then has none yet using its storage
            for item in self.source.restore(refs):
                self._hold(item)
        self.source.reset(None if state is None else state["source"])
        super().reset(state)

    def next(self) -> R:
        if self.size <= 1:
            return next(self.source)
        buffer, refs, pull = self._buffer, self._refs, self.source.next  # reset: pulled directly
        while not self._drained:
            try:
                sample = pull()
            except StopIteration:
                self._draws.shuffle(buffer)
                buffer.reverse()  # popped from the end: the shuffled order, first to last
                self._refs = array("q", [n for item in buffer for n in item.ref])
                self._drained = True
                break
            buffer.append(sample)
            refs.extend(sample.ref)
            if len(buffer) < self.size:  # still filling: one more read for this yield
                try:
                    more = pull()
                except StopIteration:
                    pass  # then the next read ends the source
                else:
                    buffer.append(more)
                    refs.extend(more.ref)
            if len(buffer) >= self.initial:
                return self._pop(self._draws.below(len(buffer)))
        if not buffer:
            raise StopIteration
        return self._pop(len(buffer) - 1)

    def get_state(self) -> State:
        if self.size <= 1:
            return {"source": self.source.state_dict()}
        return {
            "words": self._draws.words,
            "drained": self._drained,
            "width": len(self._buffer[0].ref) if self._buffer else 0,
            "buffer": array("q", self._refs),
            "source": self.source.state_dict(),
        }

    def _hold(self, item: R) -> None:
        self._buffer.append(item)
        self._refs.extend(item.ref)

    def _pop(self, i: int) -> R:
        """The item at place ``i``, taken: the last item (and its ref) takes its place."""
        buffer, refs = self._buffer, self._refs
        item, last = buffer[i], len(buffer) - 1
        w = len(item.ref)
        if i != last:
            buffer[i] = buffer[last]
            refs[i * w : i * w + w] = refs[last * w :]
        buffer.pop()
        del refs[last * w :]
        return item
