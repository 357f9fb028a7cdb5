"""Checkpoints taken by a training loop every K steps, in one of three modes, each save's cost to
the loop recorded:

- ``sync``: ``dcp.save``; the loop waits for the whole write and its commit.
- ``async``: ``dcp.async_save`` with DCP's default staging (the state copied into fresh host memory);
  the loop waits for the copy, the write runs on a thread beside training.
- ``async_pinned``: ``dcp.async_save`` with :class:`~iobench.checkpoint.staging.HostStager` (reused
  page-aligned buffers, pinned where CUDA is); the loop waits for the copy alone.

An asynchronous save that is still writing when the next one is due is waited for first: that wait
is blocked time too. Several ranks save together, through a process group of their own (gloo), so
the checkpoint's collectives never interleave with training's.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import torch.distributed.checkpoint as dcp

from iobench.results.checkpoint import SaveFigures
from iobench.results.choices import CheckpointMode

from .errors import CheckpointError, TierFull, cause, is_no_space
from .staging import HostStager
from .state import state_bytes
from .targets import Target
from .timing import io_counter


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}"


@dataclass
class _Pending:
    called: float  # when the loop asked for the save
    step: int
    name: str
    started: float
    blocked_s: float
    waited_s: float
    nbytes: int
    future: Any
    ended: float | None = None
    writer: Any = None


class Checkpointer:
    """Saves ``state()`` to ``target`` every ``every_steps`` steps; ``origin`` is the perf_counter
    the loop's times count from (its loader's construction)."""

    def __init__(
        self,
        target: Target,
        mode: CheckpointMode,
        every_steps: int,
        state: Callable[[], dict[str, Any]],
        *,
        origin: float,
        rank: int = 0,
        group: Any = None,
        keep: int = 2,
        on_saved: Callable[[int], None] | None = None,
    ) -> None:
        self.target, self.mode, self.every, self.state = target, mode, every_steps, state
        self.origin, self.rank, self.group, self.keep = origin, rank, group, keep
        self.on_saved = on_saved  # told each committed save's bytes (a live exporter)
        self.stager = HostStager(pin=True) if mode == "async_pinned" else None
        self.saves: list[SaveFigures] = []
        self.committed: list[str] = []
        self.pending: _Pending | None = None
        self.request_seconds: list[float] = []  # every save's requests (a part, or a file)
        self._written_before = io_counter("write_bytes")
        self.device_bytes: int | None = None  # what the process wrote to block devices meanwhile

    @property
    def no_dist(self) -> bool:
        return self.group is None

    def after_step(self, step: int) -> float:
        """Called as step ``step`` ends: saves when one is due; returns the seconds the loop waited."""
        if (step + 1) % self.every:
            return 0.0
        return self.save(step)

    def save(self, step: int) -> float:
        t0 = time.perf_counter()
        waited = self._finish_pending()
        name = checkpoint_name(step)
        state = self.state()
        writer = self.target.writer()
        started = time.perf_counter()
        kwargs = dict(
            checkpoint_id=self.target.checkpoint_id(name),
            storage_writer=writer,
            process_group=self.group,
            no_dist=self.no_dist,
        )
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", UserWarning
            )  # DCP's "assuming the intent is ... a single process"
            try:
                if self.mode == "sync":
                    dcp.save(state, **kwargs)
                    future = None
                else:
                    future = dcp.async_save(state, async_stager=self.stager, **kwargs)
            except BaseException as exc:  # DCP's CheckpointException is a BaseException
                raise self._failed(exc, name, writer) from None
        now = time.perf_counter()
        pending = _Pending(
            t0, step, name, started, now - t0, waited, state_bytes(state), future, writer=writer
        )
        if future is None:
            pending.ended = now
            self._record(pending)
        else:

            def ended(_done: object) -> None:
                pending.ended = time.perf_counter()

            # a stager that stages in the background makes DCP answer with both futures (as
            # _finish_pending reads it): the save has ended with its upload
            (future if isinstance(future, Future) else future.upload_completion).add_done_callback(ended)
            self.pending = pending
        return now - t0

    def background(self) -> list[tuple[float, float]]:
        """(start, end) of each background write, in the loop's seconds: the steps inside ran beside it."""
        return [(s.start_s + s.blocked_s, s.end_s) for s in self.saves if self.mode != "sync"]

    def close(self) -> list[SaveFigures]:
        """Waits for a save still writing; returns every save's figures."""
        self._finish_pending()
        if self.stager is not None:
            self.stager.close()
        after = io_counter("write_bytes")
        if after is not None and self._written_before is not None:
            self.device_bytes = after - self._written_before
        return self.saves

    def _finish_pending(self) -> float:
        pending, self.pending = self.pending, None
        if pending is None:
            return 0.0
        t0 = time.perf_counter()
        try:
            result = pending.future
            (result.upload_completion if hasattr(result, "upload_completion") else result).result()
        except BaseException as exc:
            raise self._failed(exc, pending.name, pending.writer) from None
        pending.ended = pending.ended or time.perf_counter()
        self._record(pending)
        return time.perf_counter() - t0

    def _record(self, p: _Pending) -> None:
        ended = p.ended if p.ended is not None else time.perf_counter()
        sync_s = getattr(getattr(p.writer, "totals", None), "sync_s", 0.0)
        self.saves.append(
            SaveFigures(
                step=p.step,
                rank=self.rank,
                bytes=p.nbytes,
                blocked_s=p.blocked_s,
                waited_previous_s=p.waited_s,
                write_s=ended - p.started,
                start_s=p.called - self.origin,
                end_s=ended - self.origin,
                sync_s=sync_s,
            )
        )
        self.request_seconds += self.target.requests(p.writer).seconds
        if self.on_saved is not None:
            self.on_saved(p.nbytes)
        self.committed.append(p.name)
        if self.rank == 0:
            while len(self.committed) > self.keep:
                self.target.remove(self.target.checkpoint_id(self.committed.pop(0)))

    def _failed(self, exc: BaseException, name: str, writer: Any) -> CheckpointError:
        inner = cause(exc)
        if self.rank == 0:
            # the tier may be down: the message says what is left, abort runs again when it answers
            with contextlib.suppress(Exception):
                self.target.abort(self.target.checkpoint_id(name))
        if isinstance(inner, CheckpointError):
            return inner
        written = self.target.requests(writer).bytes
        if is_no_space(inner):
            return TierFull(
                self.target.where, written, state_bytes(self.state()), self.target.checkpoint_id(name)
            )
        return CheckpointError(
            f"saving checkpoint {name} to {self.target.where} with {self.target.writer_name} failed "
            f"({written} bytes acknowledged): {type(inner).__name__}: {inner}; nothing of it was committed (a reader opens a "
            "checkpoint by its metadata, written last), the previous checkpoint is intact"
        )
