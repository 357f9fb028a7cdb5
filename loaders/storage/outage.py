"""A gateway restart ridden through: which faults are an outage, and the seconds it cost a reader.

A store that has answered in this process (or in the process that built the reader's spec:
SourceSpec.answered_endpoints) and then refuses or resets connections is taken to be restarting
(a radosgw or MinIO restart takes seconds): its requests are retried until the deadline rather
than within the attempt budget. A store that never answered is more likely a wrong endpoint, and
keeps failing fast (loaders/storage/objectstore.py).
"""

from __future__ import annotations

import threading
import time

from loaders.observe.counters import FaultKind

# the fault kinds (objectstore.classify) of a gateway that is down or restarting
OUTAGE_FAULTS: frozenset[FaultKind] = frozenset({"connect_failed", "connection_reset"})


class OutageClock:
    """Wall seconds in which at least one request of this reader waited out an outage: the union of
    the requests' waits (from each one's first refusal to its answer or failure), so that four
    requests held up in the same second count that second once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = 0
        self._since = 0.0

    def hold(self) -> None:
        """A request starts waiting out an outage."""
        with self._lock:
            if self._held == 0:
                self._since = time.monotonic()
            self._held += 1

    def release(self) -> float:
        """A request waits no more; the seconds of an outage that ended with it (else 0)."""
        with self._lock:
            self._held -= 1
            return time.monotonic() - self._since if self._held == 0 else 0.0
