"""The training loop's side: every ``next()`` the job calls on a DataLoader's iterator (or a DALI
iterator), timed from the call to the batch in hand, with the process's CPU at the call; each
DataLoader's settings when first iterated; epochs; and, once ``iobench probe`` has set where the
measured window ends (control.py), the phases after it:

- the step alone: the loop is handed the last real batches again, from memory, for ``replay``
  steps and on until the median step is known within ``REPLAY_PRECISION`` (at most
  ``replay_max_s``), so the job's own step runs with no data wait (the loader's workers idle
  meanwhile: no batch is asked of them once their queue is full);
- the loader alone: inside one ``next()`` the stream's own iterator is drained with nothing
  consuming for ``alone_s`` seconds (after the batches its workers had queued), and the last batch
  is handed to the loop; an epoch too short for it is said (a ``skip`` record) and the phase left
  out, never waited for;
- then the job stops (``SystemExit(0)`` from ``next()``: its ``finally`` blocks and exit handlers
  run, its output is flushed) or goes on with the hooks switched off.

A stream is one DataLoader, or the DataLoaders of one kind that the job re-creates (same dataset
class and length, batch size and workers: a loader built anew each epoch stays one stream).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from . import worker
from .control import Control, ControlPlan
from .log import Log
from .records import PHASE_ALONE, PHASE_MEASURED, PHASE_REPLAYED

MEASURE, REPLAY, ALONE, STOP, OFF, AFTER = range(6)
KEEP = 2  # real batches kept for the step alone
ALONE_MIN_BATCHES = 10
ALONE_MAX_S = 30.0
# the step alone's median step is known well enough: its 95 % interval (order statistics) within
# this share of it, over the replayed steps after the first REPLAY_SETTLE
REPLAY_PRECISION = 0.10
REPLAY_SETTLE = 3
ROOT_ATTRIBUTES = ("root", "data_dir", "img_dir", "image_dir", "directory", "path")
LIST_ATTRIBUTES = ("samples", "imgs", "files", "paths", "image_paths", "filenames", "file_list")


class Stream:
    def __init__(self, tag: str, info: dict) -> None:
        self.tag = tag
        self.info = info
        self.steps = 0  # batches handed to the loop
        self.epochs = 0
        self.kept: deque = deque(maxlen=KEEP)
        self.device_open: tuple | None = None
        self.alone_done = False  # the loader-alone phase ran (it may have ended the epoch), or was left out
        self.depth = int(info.get("workers") or 0) * int(info.get("prefetch_factor") or 0)
        self.replay_calls: list[float] = []  # when each replayed next() was called
        self.replay_done = False


def batch_samples(data: Any, fallback: int) -> int:
    """Samples in a batch: the leading size of its first tensor (through lists, tuples and dicts)."""
    for _ in range(4):
        shape = getattr(data, "shape", None)
        if shape is not None:
            return int(shape[0]) if len(shape) else 1
        if isinstance(data, dict) and data:
            data = next(iter(data.values()))
        elif isinstance(data, list | tuple) and data:
            data = data[0]
        else:
            break
    return fallback


def _batches_left(it: Any) -> int | None:
    """Batches a DataLoader iterator has yet to hand out this epoch; None where it cannot say."""
    try:
        return len(it) - int(it._num_yielded)
    except Exception:
        return None


def _batches_in_epoch(it: Any) -> int | None:
    """Batches a DataLoader iterator hands out in a whole epoch; None where it cannot say."""
    try:
        return len(it)
    except Exception:
        return None


def replayed_enough(calls: list[float], plan: ControlPlan) -> bool:
    """Whether the step alone has replayed enough: ``plan.replay`` steps where ranks run in step;
    else at least that many over at least ``plan.replay_min_s``, and on until the median step (call
    to call) is known within REPLAY_PRECISION, or ``plan.replay_max_s`` have passed."""
    if len(calls) < plan.replay:
        return False
    if plan.replay_max_s <= 0 or calls[-1] - calls[0] >= plan.replay_max_s:
        return True
    if calls[-1] - calls[0] < plan.replay_min_s:  # a spell of the host's load is shorter than this
        return False
    if len(calls) % 8:  # the interval is read every 8 steps: sorting is not free
        return False
    periods = sorted(b - a for a, b in zip(calls[REPLAY_SETTLE:-1], calls[REPLAY_SETTLE + 1 :], strict=True))
    n = len(periods)
    if n < 8:
        return False
    half = 0.98 * n**0.5  # 1.96 x sqrt(n) / 2
    low, high = periods[max(0, int(n / 2 - half))], periods[min(n - 1, int(n / 2 + half + 0.999) - 1)]
    median = periods[n // 2]
    return median > 0 and (high - low) / 2 <= REPLAY_PRECISION * median


def _path_root(dataset: Any) -> str | None:
    """Where a dataset's files seem to live: a directory attribute, else the common directory of
    the paths it lists (ImageFolder's ``samples``, a list of files)."""
    for _ in range(3):  # through Subset and the like
        for name in ROOT_ATTRIBUTES:
            value = getattr(dataset, name, None)
            if isinstance(value, str | os.PathLike) and os.path.isdir(value):
                return os.path.abspath(value)
        for name in LIST_ATTRIBUTES:
            items = getattr(dataset, name, None)
            if isinstance(items, list | tuple) and items:
                paths = [i[0] if isinstance(i, list | tuple) and i else i for i in items[:256]]
                paths = [os.fspath(p) for p in paths if isinstance(p, str | os.PathLike)]
                if paths:
                    try:
                        common = os.path.commonpath([os.path.abspath(p) for p in paths])
                    except ValueError:
                        continue
                    return common if os.path.isdir(common) else os.path.dirname(common)
        dataset = getattr(dataset, "dataset", None)
        if dataset is None:
            break
    return None


def loader_info(loader: Any, torch: Any) -> dict:
    """A DataLoader's settings, as the sweep file the probe writes needs them."""
    dataset = loader.dataset
    iterable = isinstance(dataset, torch.utils.data.IterableDataset)
    try:
        length = None if iterable else len(dataset)
    except Exception:
        length = None
    context = loader.multiprocessing_context
    if context is not None:
        context = context.get_start_method()
    elif loader.num_workers:
        context = torch.multiprocessing.get_start_method(allow_none=True) or "default"
    return {
        "kind": "torch",
        "dataset": f"{type(dataset).__module__}.{type(dataset).__qualname__}",
        "iterable": iterable,
        "length": length,
        "batch_size": loader.batch_size,
        "workers": loader.num_workers,
        "prefetch_factor": loader.prefetch_factor if loader.num_workers else 0,
        "pin_memory": bool(loader.pin_memory),
        "persistent_workers": bool(loader.persistent_workers),
        "context": context,
        "drop_last": bool(loader.drop_last),
        "sampler": type(loader.sampler).__name__,
        "collate": getattr(loader.collate_fn, "__name__", type(loader.collate_fn).__name__),
        "root": _path_root(dataset),
    }


class Loop:
    def __init__(self, log: Log, control: Control, ceilings: bool) -> None:
        self.log = log
        self.control = control
        self.ceilings = ceilings
        self.active = True
        self.device: Any = None  # a device.DeviceClock once torch is there
        self._streams: dict[tuple, Stream] = {}

    def stream(self, key: tuple, info: Callable[[], dict]) -> Stream:
        found = self._streams.get(key)
        if found is None:
            tag = f"{os.getpid()}-{len(self._streams)}"
            found = self._streams[key] = Stream(tag, info())
            self.log.write(["loader", tag, time.perf_counter(), found.info])
        return found

    def epoch(self, stream: Stream, t: float, t_ready: float) -> None:
        self.log.write(["epoch", stream.tag, t, t_ready, stream.epochs], t_ready)
        stream.epochs += 1

    def _phase(self, stream: Stream) -> int:
        plan = self.control.plans.get(stream.tag)
        if plan is None or stream.steps < plan.end:
            return MEASURE
        if self.ceilings and plan.replay and stream.kept and not stream.replay_done:
            return REPLAY
        if self.ceilings and plan.alone_s > 0 and not stream.alone_done:
            return ALONE
        if self.control.then != "stop":
            return OFF
        return STOP if stream.steps >= plan.stop else AFTER

    def next(self, stream: Stream, it: Any, original: Callable[[Any], Any]) -> Any:
        """One next() of the loop on ``it`` (``original`` the iterator's own). What the job's own
        next() raises passes through; a fault of the probe's own switches the hooks off and the job
        goes on as it would have."""
        try:
            c0 = time.process_time()
            t0 = time.perf_counter()
            self.control.poll(t0)
            if self.control.off:
                self.active = False
                return original(it)
            if self.device is not None:
                self.device.on_call(stream)
            phase = self._phase(stream)
        except Exception as exc:
            self.failed("the loop's next()", exc)
            return original(it)
        if phase == STOP:
            self._stop(stream, t0)
        if phase == OFF:
            self.active = False
            self.log.flush()
            return original(it)
        if phase == AFTER:  # the phases done, the job on to the step where every rank stops
            data = original(it)
            stream.steps += 1
            return data
        if phase == REPLAY:
            data = stream.kept[stream.steps % len(stream.kept)]
            code = PHASE_REPLAYED
            stream.replay_calls.append(t0)
            stream.replay_done = replayed_enough(stream.replay_calls, self.control.plans[stream.tag])
        elif phase == ALONE:
            data = self._alone(stream, it, original, self.control.plans[stream.tag])
            code = PHASE_ALONE
        else:
            worker.STATE.main_tag = stream.tag
            try:
                data = original(it)
            except StopIteration:
                self.log.write(["end", stream.tag, t0, time.perf_counter()])
                raise
            code = PHASE_MEASURED
        try:
            t1 = time.perf_counter()
            if self.ceilings and code == PHASE_MEASURED:
                stream.kept.append(data)
            samples = batch_samples(data, int(stream.info.get("batch_size") or 1))
            self.log.write(["step", stream.tag, t0, t1, c0, samples, code], t1)
            if self.device is not None:
                self.device.on_return(stream, stream.steps)
            stream.steps += 1
        except Exception as exc:
            self.failed("the loop's next()", exc)
        return data

    def failed(self, where: str, exc: Exception) -> None:
        """A fault of the probe's own: said in the records, the hooks off from here on."""
        self.active = False
        self.log.write(["error", time.perf_counter(), where, f"{type(exc).__name__}: {exc}"])
        self.log.flush()

    def _skip(self, stream: Stream, phase: str, why: str) -> None:
        stream.alone_done = True
        self.log.write(["skip", stream.tag, time.perf_counter(), phase, why])

    def _alone(self, stream: Stream, it: Any, original: Callable[[Any], Any], plan: ControlPlan) -> Any:
        """The loader alone, inside one next(): drain ``it`` with nothing consuming, then hand the
        loop the last batch: for ``plan.alone_s`` seconds, or, where ranks run in step, exactly
        ``plan.alone_batches`` batches on every rank (each rank's epoch must keep as many batches as
        the others'). It leaves the epoch's last batch to the loop, and an epoch too near its end to
        measure in puts it off to the next one."""
        counted = plan.alone_batches
        left = _batches_left(it)
        needed = stream.depth + max(counted, ALONE_MIN_BATCHES) + 2
        whole = _batches_in_epoch(it)
        if whole is not None and whole < needed:  # no epoch of this stream will have room for it
            self._skip(
                stream,
                "alone",
                f"an epoch of {whole} batches is shorter than the {needed} the loader alone takes (the "
                f"{stream.depth} its workers queue, {max(counted, ALONE_MIN_BATCHES)} timed, the epoch's last)",
            )
            return original(it)
        if left is not None and left < needed:  # too near this epoch's end: the next one's start
            return original(it)
        seconds = plan.alone_s
        start = time.perf_counter()
        t_from = start if stream.depth == 0 else None
        untimed = batches = samples = 0
        fallback = int(stream.info.get("batch_size") or 1)
        data = None
        ended = False
        try:
            while True:
                data = original(it)
                now = time.perf_counter()
                if left is not None:
                    left -= 1
                if t_from is None:
                    untimed += 1
                    if untimed >= stream.depth:
                        t_from = now
                    continue
                batches += 1
                samples += batch_samples(data, fallback)
                if counted:
                    enough = batches >= counted
                else:
                    enough = (
                        batches >= ALONE_MIN_BATCHES and now - t_from >= seconds
                    ) or now - start >= ALONE_MAX_S
                if enough or left == 1:
                    break
        except StopIteration:
            ended = True
        end = time.perf_counter()
        stream.alone_done = True
        self.log.write(["alone", stream.tag, start, t_from, end, batches, samples, untimed, ended], end)
        if ended:
            self.log.write(["end", stream.tag, end, end])
            raise StopIteration
        return data

    def _stop(self, stream: Stream, t: float) -> None:
        self.log.write(["stop", stream.tag, t, stream.steps], t)
        if self.device is not None:
            self.device.poll(wait=True)
        self.log.flush()
        if threading.current_thread() is threading.main_thread():
            raise SystemExit(0)
        # a loader iterated in a thread of its own (a prefetcher): that thread's SystemExit would end
        # only it, and the loop would wait for ever; the probe ends the job (the record says why)
        self.active = False
        import signal

        os.kill(os.getpid(), signal.SIGTERM)
        raise SystemExit(0)
