"""The I/O and CPU counters of a process and its descendants: what one job did, whatever else the
host was doing.

The kernel keeps per-process I/O accounting (/proc/PID/io): ``read_bytes`` is what the process
caused to be read from block devices (page-cache hits excluded, readahead it triggered included),
``read_chars`` every byte its read calls returned (page cache, sockets and pipes included). Linux
adds a reaped child's counters to its parent's, so the sum over the live tree carries on when a
DataLoader worker exits at the end of an epoch. Between a worker's exit and its reaping the sum can
dip; the totals are the highest sums seen, so they never go back.
"""

from __future__ import annotations

import threading

import psutil

COUNTERS = ("read_chars", "read_bytes", "user", "system")


class ProcessTree:
    """Counters of the process ``pid`` and its descendants. Raises ``psutil.NoSuchProcess`` or
    ``psutil.AccessDenied`` when the process is gone or its counters are not readable."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.root.io_counters()
        self._high: dict[str, float] = {}
        self._lock = threading.Lock()  # two readers at once must not race on the high-water marks

    def alive(self) -> bool:
        try:
            return self.root.is_running() and self.root.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def totals(self) -> dict[str, float]:
        """Sums over the tree now: the counters of COUNTERS as high-water marks, ``rss`` and
        ``processes`` as they are."""
        sums = dict.fromkeys((*COUNTERS, "rss", "processes"), 0.0)
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for proc in procs:
            try:
                with proc.oneshot():
                    io, cpu, rss = proc.io_counters(), proc.cpu_times(), proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # exited meanwhile (its counters moved to its parent), or not ours to read
            sums["read_chars"] += io.read_chars
            sums["read_bytes"] += io.read_bytes
            sums["user"] += cpu.user + cpu.children_user
            sums["system"] += cpu.system + cpu.children_system
            sums["rss"] += rss
            sums["processes"] += 1
        with self._lock:
            for key in COUNTERS:
                sums[key] = self._high[key] = max(self._high.get(key, 0.0), sums[key])
        return sums
