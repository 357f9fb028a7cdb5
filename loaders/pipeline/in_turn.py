"""Items of several sources taken one from each in turn (DataLoader's round robin over its
workers), each source run ahead in a thread of its own into a bounded queue: the thread backend's
readers, and the DALI feed's fetchers. An error a source raised is raised in the consumer.

Its state: whose turn it is, and each source's state as of the last item taken from it (the
thread took it right after the item, before reading on), so a reset goes on exactly there.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any, TypeVar

from loaders.pipeline.node import Node, State

T = TypeVar("T")
END = object()  # a source's items are all out
POLL_S = 0.1  # how often a thread waiting on a full queue checks whether the consumer stopped


def put(out: queue.Queue, item: object, stop: threading.Event) -> bool:
    """``item`` into ``out`` once there is room; False if ``stop`` was set first."""
    while not stop.is_set():
        try:
            out.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


class InTurn(Node[T]):
    """One item from each of ``sources`` in turn, each source in a thread running up to ``depth``
    items ahead. ``stop`` (set by :meth:`close`) ends the threads at their next item; a source that
    can stop sooner (a batcher between samples) may watch it too."""

    def __init__(
        self,
        sources: Sequence[Node[T]],
        depth: int,
        stop: threading.Event | None = None,
        name: str = "loaders-reader",
    ) -> None:
        self.sources, self.depth, self.name = list(sources), max(1, depth), name
        self.stop = stop or threading.Event()
        self._threads: list[threading.Thread] = []
        self._queues: list[queue.Queue] = []
        self._live: list[int] = []
        self._turn = 0
        self._states: list[State | None] = []

    def reset(self, state: State | None = None) -> None:
        self._join()
        self.stop.clear()
        n = len(self.sources)
        self._live = list(range(n)) if state is None else list(state["live"])
        self._turn = 0 if state is None else state["turn"]
        self._states = [None] * n if state is None else list(state["sources"])
        self._queues = [queue.Queue(maxsize=self.depth) for _ in range(n)]
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"{self.name}-{i}", daemon=True)
            for i in self._live
        ]
        for thread in self._threads:
            thread.start()
        super().reset(state)

    def next(self) -> T:
        while self._live:
            at = self._turn % len(self._live)
            got = self._queues[self._live[at]].get()
            if got is END:
                del self._live[at]
                self._turn = at
                continue
            if isinstance(got, BaseException):
                raise got
            item, self._states[self._live[at]] = got
            if getattr(item, "ref", None) is not None:
                item.ref = (self._live[at], *item.ref)  # whose it is: restore asks that source
            self._turn = at + 1
            return item
        raise StopIteration

    def get_state(self) -> State:
        return {"live": list(self._live), "turn": self._turn, "sources": list(self._states)}

    def close(self) -> None:
        self._join()

    def _run(self, i: int) -> None:
        source, out = self.sources[i], self._queues[i]
        try:
            source.reset(self._states[i])  # here: restoring a state may read, each source in its thread
            for item in source:
                if not put(out, (item, source.state_dict()), self.stop):
                    return
            put(out, END, self.stop)
        except BaseException as exc:  # handed to the consumer, who raises it
            put(out, exc, self.stop)
        finally:
            source.close()

    def _join(self) -> None:
        self.stop.set()  # a consumer that stopped early: each source stops at its next item
        for thread in self._threads:
            thread.join()
        self._threads = []

    def restore(self, refs: Sequence[Any]) -> list:
        """Items by their refs as this node gave them, ``(source, *the source's ref)``."""
        by_source: dict[int, list] = {}
        for ref in refs:
            by_source.setdefault(ref[0], []).append(tuple(ref[1:]))
        found = {}
        for i, wanted in by_source.items():
            for item in self.sources[i].restore(wanted):
                item.ref = (i, *item.ref)
                found[item.ref] = item
        return [found[tuple(ref)] for ref in refs]
