"""A pipeline stage as a node: torchdata.nodes' contract (``next``, ``reset(state)``,
``get_state``, and ``state_dict`` / ``__next__`` around them), without torchdata, so that the torch
and thread backends run the same stages and torchdata's own nodes (its mapper, its prefetcher) take
ours as their sources.

A node's state is small and plain (ints, lists, dicts: it goes in a checkpoint as JSON) and says
where the node stands, not what it holds: a shuffle buffer's samples by where to read them again
(their refs), so that a node reset from a state goes on exactly where it stood without reading
again what it had passed on.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from loaders.formats.base import Ref

T = TypeVar("T")
State = dict[str, Any]


class Referenced(Protocol):
    """An item that says where to read it again (its ``ref``): what a state holds it by."""

    @property
    def ref(self) -> Ref: ...


class Node(Iterator[T], Generic[T]):
    """A stage: ``next()`` the next item or StopIteration (again on every call once ended);
    ``reset(state)`` back to the start, or to where ``state`` (a ``state_dict()`` taken earlier)
    stood; ``close()`` releases what it holds (threads, files), its sources' too."""

    _ready = False
    source: Node[Any]  # the node it draws from, where it has one: restore's and close's default

    def __iter__(self) -> Node[T]:
        return self

    def __next__(self) -> T:
        if not self._ready:
            self.reset(None)
        return self.next()

    def state_dict(self) -> State:
        if not self._ready:
            self.reset(None)
        return self.get_state()

    def reset(self, state: State | None = None) -> None:
        """Subclasses reset their sources and themselves, then call this."""
        self._ready = True

    def next(self) -> T:
        raise NotImplementedError

    def get_state(self) -> State:
        raise NotImplementedError

    def restore(self, refs: Sequence[Ref]) -> list:
        """The items these refs name (each item carries its ``ref``), fetched again: what a state
        holds by reference. By default the source's (a node passing its source's items on)."""
        return self.source.restore(refs)

    def close(self) -> None:
        source = getattr(self, "source", None)
        if source is not None and hasattr(source, "close"):
            source.close()


def plain(state: Any) -> Any:
    """``state`` as plain data for a checkpoint (JSON): the flat arrays a node keeps its refs in
    (they pickle as bytes between processes) as lists."""
    if isinstance(state, dict):
        return {key: plain(value) for key, value in state.items()}
    if isinstance(state, list | tuple):
        return [plain(value) for value in state]
    if isinstance(state, array):
        return state.tolist()
    return state
