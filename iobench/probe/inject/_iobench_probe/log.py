"""One process's records, appended to ``<dir>/p<pid>.jsonl``.

A record is kept in memory (a list append: the hot path) and the pending ones are encoded and
written in one ``write`` at most every ``FLUSH_S`` seconds, from whichever thread records next, and
when the process ends. A process's first ``EAGER`` records, and every record but a step's numbers,
are written at once: a job killed early (SIGKILL, a crash in native code) leaves what it did. No thread of its own: a DataLoader forks its workers, and a thread holding a
lock at the fork would leave the child stuck on it. A forked child forgets what its parent had
pending and writes a file of its own. Multiprocessing's children skip ``atexit`` (a forked worker
ends in ``os._exit``), so a worker also flushes through multiprocessing's own finalizers.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time

from .records import log_name

FLUSH_S = 0.2
MAX_PENDING = 1024
EAGER = 64


# the records of a step's numbers and its stream's tag ("<pid>-<n>"): many, and each field an int, a
# float (whose repr is JSON) or the tag, so they skip the json module
PLAIN = frozenset({"step", "fetch", "device", "pin", "end", "epoch", "stop"})
# the records of every step or batch: buffered; the rest (epochs, phases, stops, errors) written at once
HOT = frozenset({"step", "fetch", "device", "pin", "h2d"})


def _encoded(record: list) -> str:
    """A record as one JSON line."""
    if record[0] in PLAIN:
        return "[" + ",".join(f'"{v}"' if type(v) is str else repr(v) for v in record) + "]"
    return json.dumps(record, separators=(",", ":"))


class Log:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._start()
        os.register_at_fork(after_in_child=self._start)
        atexit.register(self.flush)

    def _start(self) -> None:
        self.pid = os.getpid()
        self._pending: list[list] = []
        self._lock = threading.Lock()  # a new one in a forked child: the parent's may have been held
        self._fd: int | None = None
        self._last = time.perf_counter()
        self._written = 0

    def write(self, record: list, now: float | None = None) -> None:
        self._pending.append(record)
        self._written += 1
        now = time.perf_counter() if now is None else now
        if (
            self._written <= EAGER
            or record[0] not in HOT
            or now - self._last >= FLUSH_S
            or len(self._pending) >= MAX_PENDING
        ):
            self.flush()

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            self._last = time.perf_counter()
            if not pending or self.pid != os.getpid():
                return
            data = "".join(_encoded(r) + "\n" for r in pending).encode()
            try:
                if self._fd is None:
                    path = os.path.join(self.directory, log_name(self.pid))
                    self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError:
                pass  # the probe's directory is gone (the probe ended): the job goes on unmeasured

    def flush_at_worker_exit(self) -> None:
        """Flush when a multiprocessing child ends (it skips atexit)."""
        import multiprocessing.util

        multiprocessing.util.Finalize(None, self.flush, exitpriority=100)
