"""Items handed from reader threads to the one that consumes them: a bounded queue per reader, a
put that gives up when the consumer has stopped, and the consumer taking from each reader in turn.
The reader threads of the threads backend and of DALI's external-source feed both hand over so."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Sequence

END = object()  # a reader's share is complete
POLL_S = 0.1  # how often a reader waiting on a full queue checks whether the consumer stopped


def put(out: queue.Queue, item: object, stop: threading.Event) -> bool:
    """``item`` into ``out`` once there is room; False if ``stop`` was set first."""
    while not stop.is_set():
        try:
            out.put(item, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False


def in_turn(queues: Sequence[queue.Queue]) -> Iterator:
    """One item from each reader's queue in turn until every reader has put END; an exception a
    reader put is raised here, in the consumer."""
    live = list(queues)
    while live:
        for q in list(live):
            item = q.get()
            if item is END:
                live.remove(q)
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
