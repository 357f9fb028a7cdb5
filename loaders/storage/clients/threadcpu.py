"""CPU time of the threads a client does its I/O on beside the caller's (fsspec's event loop,
a tokio runtime, the CRT's event loops): the client's own cost per request and per byte, which
the reader reports beside the calling threads' CPU in its requests.

Those threads are shared by every reader of the process, so the time is handed out once: each
``take`` returns what the threads used since the previous ``take`` by anyone in the process, and
the takes of all readers add up to the threads' CPU.
"""

from __future__ import annotations

import glob
import threading
import time

_seen: dict[int, float] = {}  # thread id -> its CPU seconds at the last take
_lock = threading.Lock()


def threads_named(*prefixes: str) -> set[int]:
    """Native ids of this process's threads whose name starts with one of ``prefixes``."""
    out = set()
    for task in glob.glob("/proc/self/task/*"):
        try:
            with open(f"{task}/comm") as f:
                if f.read().startswith(prefixes):
                    out.add(int(task.rsplit("/", 1)[1]))
        except OSError:  # the thread ended meanwhile
            continue
    return out


def _cpu_s(tid: int) -> float | None:
    """The thread's CPU seconds, from its CPU-time clock (Linux's clock id of a thread: the
    nanosecond figure, where /proc's is in 10 ms ticks); None when the thread has ended."""
    try:
        return time.clock_gettime(((~tid) << 3) | 6)  # MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)
    except (OSError, OverflowError):  # ended, or never a thread id
        return None


def take(tids: set[int]) -> float:
    """CPU seconds the threads ``tids`` used since they were last taken (the first take of a
    thread counts from its start: it is the client's since then)."""
    total = 0.0
    with _lock:
        for tid in tids:
            now = _cpu_s(tid)
            if now is None:
                continue
            total += now - _seen.get(tid, 0.0)
            _seen[tid] = now
    return total
