"""The loader's side: each batch a DataLoader worker (or, without workers, the loop's own process)
makes, timed inside ``fetch``: the dataset's part (``__getitem__`` for each index, ``__getitems__``,
or an IterableDataset's iterator) and collate, each as wall time, CPU time and time spent runnable
but waiting for a core (the thread's run-queue wait, /proc/thread-self/schedstat), with the bytes
the process's read calls returned and read from block devices (/proc/self/io).

Wall = CPU + waiting for a core + blocked (storage, a sleep, a lock): the blocked part is what a
slow store costs, the CPU part what decoding and augmenting cost, the run-queue part what too few
cores cost. A worker learns which stream it serves from the ``worker_init_fn`` the loop's side
wraps around the job's own (``WorkerInit``: picklable, so spawned and forkserver workers get it).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from .control import Control
from .log import Log


class _State:
    log: Log | None = None
    control: Control | None = None
    tag: str | None = None  # the stream this worker makes batches for
    worker: int = -1  # -1: the loop's own process (no workers)
    main_tag: str | None = None  # the stream whose batch the loop's process is making
    recording = True


STATE = _State()
_FDS: dict[tuple[int, int], int | None] = {}  # (pid, thread) -> an open /proc file, kept: a pread is cheap


def _proc_fd(path: str, key: tuple[int, int]) -> int | None:
    """An open descriptor of ``path`` for this process and thread (opened once: a forked child, whose
    descriptors would name its parent's files, opens its own)."""
    try:
        return _FDS[key]
    except KeyError:
        pass
    try:
        fd: int | None = os.open(path, os.O_RDONLY)
    except OSError:
        fd = None
    _FDS[key] = fd
    return fd


def _runq_s() -> float:
    """This thread's time runnable but not running, in seconds (0 where the kernel keeps none)."""
    tid = threading.get_native_id()
    fd = _FDS.get((os.getpid(), tid), -1)
    if fd == -1:
        fd = _proc_fd(f"/proc/self/task/{tid}/schedstat", (os.getpid(), tid))
    try:
        return int(os.pread(fd, 128, 0).split()[1]) / 1e9 if fd is not None else 0.0
    except (OSError, IndexError, ValueError):
        return 0.0


def _io() -> tuple[int, int]:
    """(rchar, read_bytes) of this process; zeros where /proc/self/io is not readable."""
    fd = _proc_fd("/proc/self/io", (os.getpid(), 0))
    if fd is None:
        return 0, 0
    try:
        words = os.pread(fd, 512, 0).split()
        # "rchar: N wchar: N syscr: N syscw: N read_bytes: N ...", in this order since Linux 2.6.20
        if words[0] == b"rchar:" and words[8] == b"read_bytes:":
            return int(words[1]), int(words[9])
    except (TypeError, OSError, IndexError, ValueError):
        pass
    return 0, 0


class _Reads:
    """The process's read counters at the end of its last batch: each batch carries what was read
    since (a process's first batch, since just before it; a forked child has counters of its own)."""

    def __init__(self) -> None:
        self.pid = -1
        self.last = (0, 0)

    def start(self) -> None:
        if self.pid != os.getpid():
            self.pid, self.last = os.getpid(), _io()

    def since_last(self) -> tuple[int, int]:
        now = _io()
        delta = (now[0] - self.last[0], now[1] - self.last[1])
        self.last = now
        return delta


_READS = _Reads()


def worker_started(tag: str, worker: int) -> None:
    STATE.tag, STATE.worker = tag, worker
    log = STATE.log
    if log is not None:
        log.flush_at_worker_exit()
        log.write(["worker", tag, worker, time.perf_counter(), os.getpid()])
    _READS.start()


class WorkerInit:
    """Wraps the job's ``worker_init_fn``: says which stream the worker serves, then runs the job's."""

    def __init__(self, tag: str, user: Callable[[int], None] | None) -> None:
        self.tag = tag
        self.user = user

    def __call__(self, worker_id: int) -> None:
        with contextlib.suppress(Exception):  # the job's own init runs whatever happens here
            worker_started(self.tag, worker_id)
        if self.user is not None:
            self.user(worker_id)


def _recording(now: float) -> bool:
    control = STATE.control
    if control is not None:
        control.poll(now)
        if control.off:
            STATE.recording = False
    return STATE.recording


def timed_fetch(original: Callable) -> Callable:
    """``_MapDatasetFetcher.fetch`` / ``_IterableDatasetFetcher.fetch`` with their two parts timed:
    the fetcher calls ``self.collate_fn`` once the samples are in, so a clock read there splits it."""

    def fetch(self: Any, possibly_batched_index: Any) -> Any:
        in_worker = STATE.worker >= 0
        tag = STATE.tag if in_worker else STATE.main_tag
        t0 = time.perf_counter()
        if tag is None or STATE.log is None or not _recording(t0):
            return original(self, possibly_batched_index)
        cpu = time.process_time if in_worker else time.thread_time
        _READS.start()
        c0, q0 = cpu(), _runq_s()
        marks: list = []
        collate = self.collate_fn

        def timed_collate(data: Any) -> Any:
            marks.append((time.perf_counter(), cpu(), _runq_s(), len(data) if isinstance(data, list) else 1))
            return collate(data)

        self.collate_fn = timed_collate
        try:
            out = original(self, possibly_batched_index)
        finally:
            self.collate_fn = collate
        try:
            _record(tag, t0, c0, q0, marks, cpu)
        except Exception:  # the probe's own fault: this batch goes unrecorded, the job on
            STATE.recording = False
        return out

    return fetch


def _record(tag: str, t0: float, c0: float, q0: float, marks: list, cpu: Callable[[], float]) -> None:
    """One batch's record, from the clocks read as its fetch began, as collate began (``marks``) and now."""
    t1, c1, q1 = time.perf_counter(), cpu(), _runq_s()
    tm, cm, qm, samples = marks[0] if marks else (t1, c1, q1, 1)
    rchar, read_bytes = _READS.since_last()
    if STATE.log is not None:
        STATE.log.write(
            [
                "fetch",
                tag,
                STATE.worker,
                t0,
                t1,
                tm - t0,
                cm - c0,
                qm - q0,
                t1 - tm,
                c1 - cm,
                q1 - qm,
                samples,
                rchar,
                read_bytes,
            ],
            t1,
        )
