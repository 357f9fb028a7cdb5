"""A reader's list of items (one object per sample: (key, url, label)), one at a time: the first
stage of the objects layout, whose shuffle reorders the items before any is read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loaders.formats.base import Ref
from loaders.pipeline.node import Node, State


@dataclass(frozen=True)
class Listed:
    """An item with its place in the list (its ``ref``)."""

    ref: Ref
    item: Any


class Items(Node[Listed]):
    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)
        self._next = 0

    def reset(self, state: State | None = None) -> None:
        self._next = 0 if state is None else state["next"]
        super().reset(state)

    def next(self) -> Listed:
        if self._next >= len(self.items):
            raise StopIteration
        self._next += 1
        return Listed((self._next - 1,), self.items[self._next - 1])

    def get_state(self) -> State:
        return {"next": self._next}

    def restore(self, refs: Sequence[Ref]) -> list[Listed]:
        return [Listed((ref[0],), self.items[ref[0]]) for ref in refs]
