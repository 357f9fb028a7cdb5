"""The device's side, where the job has initialised CUDA itself (the probe never does: a process
that initialises CUDA before forking its DataLoader workers breaks them).

- Device time per step: a CUDA event recorded on the current stream when next() hands the loop its
  batch and another when the loop calls next() again. The span between them is the device's time on
  the step's work (from when it started the step to when it finished what the step launched), not
  counting the time it sat idle while the loop waited for data. The events are read with
  ``query()`` once both have passed, a step or more later, so the probe never synchronises.
- Host-to-device copies: ``Tensor.to`` and ``Tensor.cuda`` from the CPU to a device, their host
  time (with ``non_blocking`` the time to enqueue, the copy itself then runs inside the device's
  step) and bytes.
- Pinning: DataLoader's ``pin_memory`` step for each batch (the outermost call; it recurses).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .log import Log

_ON = [False]  # CUDA initialised by the job: set at each next(), read by the copy hooks


class DeviceClock:
    def __init__(self, log: Log, torch: Any) -> None:
        self.log = log
        self.torch = torch
        self.pending: deque = deque()  # (tag, step, start event, end event), oldest first
        self.spare: list = []

    def _event(self) -> Any:
        return self.spare.pop() if self.spare else self.torch.cuda.Event(enable_timing=True)

    def on_call(self, stream: Any) -> None:
        """The loop asks for its next batch: the step it ran on the last one is launched."""
        _ON[0] = on = self.torch.cuda.is_initialized()
        if not on:
            return
        if stream.device_open is not None:
            step, start = stream.device_open
            end = self._event()
            end.record()
            self.pending.append((stream.tag, step, start, end))
            stream.device_open = None
        self.poll()

    def on_return(self, stream: Any, step: int) -> None:
        if _ON[0]:
            start = self._event()
            start.record()
            stream.device_open = (step, start)

    def poll(self, wait: bool = False) -> None:
        while self.pending:
            tag, step, start, end = self.pending[0]
            if wait:
                end.synchronize()
            elif not end.query():
                return
            self.pending.popleft()
            self.log.write(["device", tag, step, start.elapsed_time(end) / 1000.0])
            self.spare.extend((start, end))


def timed_copy(original: Callable) -> Callable:
    """``Tensor.to`` / ``Tensor.cuda``, recording a copy from the CPU to a device."""

    def copy(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _ON[0] or _LOG[0] is None or self.device.type != "cpu":
            return original(self, *args, **kwargs)
        t0 = time.perf_counter()
        out = original(self, *args, **kwargs)
        t1 = time.perf_counter()
        if getattr(out, "device", None) is not None and out.device.type != "cpu":
            _LOG[0].write(["h2d", t0, t1, self.nbytes, bool(kwargs.get("non_blocking", False))], t1)
        return out

    copy.__name__, copy.__qualname__, copy.__doc__ = (
        original.__name__,
        original.__qualname__,
        original.__doc__,
    )
    return copy


_LOG: list[Log | None] = [None]
_PINNING = threading.local()


def timed_pin(original: Callable) -> Callable:
    def pin_memory(data: Any, device: Any = None) -> Any:
        if getattr(_PINNING, "inside", False) or _LOG[0] is None:
            return original(data, device)
        _PINNING.inside = True
        try:
            t0 = time.perf_counter()
            out = original(data, device)
            t1 = time.perf_counter()
        finally:
            _PINNING.inside = False
        _LOG[0].write(["pin", t0, t1], t1)
        return out

    return pin_memory


def install_copy_hooks(log: Log, torch: Any) -> None:
    _LOG[0] = log
    torch.Tensor.to = timed_copy(torch.Tensor.to)
    torch.Tensor.cuda = timed_copy(torch.Tensor.cuda)
