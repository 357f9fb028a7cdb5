"""The hooks ``iobench probe`` loads into each Python process of a job (through sitecustomize).

``install()`` does nothing unless ``IOBENCH_PROBE_DIR`` names the probe's directory. Then it writes
a hello record (who this process is) and arranges for the patches to go in when the job imports
what they patch: torch's DataLoader (the loop's next(), each epoch, the workers' fetch, pinning),
torch's copies to a device, and DALI's PyTorch iterators. Nothing here imports torch or DALI.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeGuard

from . import worker
from .control import Control
from .imports import Hook, when_imported
from .log import Log
from .loop import Loop, Stream, loader_info
from .records import ENV_CEILINGS, ENV_DIR

_LOOP: list[Loop] = []
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def install() -> bool:
    directory = os.environ.get(ENV_DIR)
    if not directory or _LOOP:
        return False
    log = Log(directory)
    control = Control(directory)
    loop = Loop(log, control, ceilings=os.environ.get(ENV_CEILINGS) == "1")
    _LOOP.append(loop)
    worker.STATE.log, worker.STATE.control = log, control
    ranks = {k: os.environ[k] for k in RANK_VARIABLES if k in os.environ}
    log.write(
        [
            "hello",
            os.getpid(),
            os.getppid(),
            time.perf_counter(),
            sys.argv,
            sys.executable,
            ranks,
            sys.version,
        ]
    )
    log.flush()
    when_imported("torch.utils.data.dataloader", _guarded(_patch_torch, log))
    when_imported("nvidia.dali.plugin.pytorch", _guarded(_patch_dali, log))
    return True


def _guarded(patch: Hook, log: Log) -> Hook:
    """A patch that fails leaves the job as it was and says so in the records."""

    def run(module: ModuleType) -> None:
        try:
            patch(module)
        except Exception as exc:
            log.write(["error", time.perf_counter(), patch.__name__, f"{type(exc).__name__}: {exc}"])
            log.flush()

    return run


def _patch_torch(dataloader: ModuleType) -> None:
    import torch
    from torch.utils.data import _utils

    from . import device

    loop = _LOOP[0]
    loop.device = device.DeviceClock(loop.log, torch)
    base = dataloader._BaseDataLoaderIter
    original_next = base.__next__
    original_iter = dataloader.DataLoader.__iter__

    def stream_of(loader: Any) -> Stream:
        try:
            length = None if loader._dataset_kind == dataloader._DatasetKind.Iterable else len(loader.dataset)
        except Exception:
            length = None
        key = ("torch", type(loader.dataset), length, loader.batch_size, loader.num_workers)
        return loop.stream(key, lambda: loader_info(loader, torch))

    def __iter__(self: Any) -> Any:
        if not loop.active:
            return original_iter(self)
        t = time.perf_counter()
        try:
            stream = stream_of(self)
            user_init = self.worker_init_fn
            if self.num_workers > 0:  # its workers learn which stream they serve
                self.worker_init_fn = worker.WorkerInit(stream.tag, user_init)
        except Exception as exc:
            loop.failed("DataLoader.__iter__", exc)
            return original_iter(self)
        try:
            it = original_iter(self)
        finally:
            self.worker_init_fn = user_init
        try:
            it.__dict__["_iobench_stream"] = stream
            loop.epoch(stream, t, time.perf_counter())
        except Exception as exc:
            loop.failed("DataLoader.__iter__", exc)
        return it

    def __next__(self: Any) -> Any:
        stream = self.__dict__.get("_iobench_stream")
        if stream is None or not loop.active:
            return original_next(self)
        return loop.next(stream, self, original_next)

    __iter__.__doc__, __next__.__doc__ = original_iter.__doc__, original_next.__doc__
    dataloader.DataLoader.__iter__ = __iter__
    base.__next__ = __next__
    for fetcher in (_utils.fetch._MapDatasetFetcher, _utils.fetch._IterableDatasetFetcher):
        fetcher.fetch = worker.timed_fetch(fetcher.fetch)  # type: ignore[method-assign]  # patching torch's fetchers in place is the probe's job
    _utils.pin_memory.pin_memory = device.timed_pin(_utils.pin_memory.pin_memory)
    device.install_copy_hooks(loop.log, torch)
    loop.log.write(["torch", time.perf_counter(), torch.__version__])


def _patch_dali(plugin: ModuleType) -> None:
    """DALI's PyTorch iterators, found by shape (a class of the plugin with its own ``__next__``):
    the loop's side only, DALI's pipeline runs in its own threads."""
    loop = _LOOP[0]
    for name in dir(plugin):
        cls = getattr(plugin, name)
        if not _has_own_next(cls):
            continue
        original = cls.__dict__["__next__"]

        def __next__(self: Any, _original: Callable[[Any], Any] = original) -> Any:
            if not loop.active or self.__dict__.get("_iobench_inside"):  # a subclass calling its base's
                return _original(self)
            stream = self.__dict__.get("_iobench_stream")
            if stream is None:
                stream = self.__dict__["_iobench_stream"] = loop.stream(
                    ("dali", id(self)), lambda: _dali_info(self)
                )
                now = time.perf_counter()
                loop.epoch(stream, now, now)
            self.__dict__["_iobench_inside"] = True
            try:
                return loop.next(stream, self, _original)
            finally:
                self.__dict__["_iobench_inside"] = False

        cls.__next__ = __next__


def _has_own_next(obj: object) -> TypeGuard[type[Any]]:
    """A class that defines ``__next__`` itself; of a module not typed here, so of any shape."""
    return isinstance(obj, type) and "__next__" in obj.__dict__


def _dali_info(iterator: Any) -> dict:
    pipes = getattr(iterator, "_pipes", None) or []
    batch = getattr(pipes[0], "max_batch_size", None) if pipes else None
    threads = getattr(pipes[0], "num_threads", None) if pipes else None
    return {
        "kind": "dali",
        "dataset": f"{type(iterator).__module__}.{type(iterator).__qualname__}",
        "iterable": True,
        "length": None,
        "batch_size": batch * len(pipes) if batch else None,
        "workers": 0,
        "threads": threads,
        "pipelines": len(pipes),
        "prefetch_factor": 0,
        "root": None,
    }
