"""A save or a restore timed on its own (no training beside it): what the benchmark, a cell's
restores and the MLPerf Storage mode measure. Bytes are the state's tensors; the bytes that reached
this host's block devices come from the process's own I/O accounting (/proc/self/io, every thread)."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch.distributed.checkpoint as dcp

from .errors import CheckpointError, cause
from .state import empty_like_state, state_bytes
from .store import IoLog
from .targets import Target


@dataclass(frozen=True)
class Timed:
    seconds: float
    bytes: int  # this rank's state
    requests: IoLog
    device_bytes: int | None  # read_bytes or write_bytes of /proc/self/io over it (None: unreadable)
    cold: str | None = None  # how a restore was made cold (None: warm, or a save)
    sync_s: float = 0.0

    @property
    def gb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


def io_counter(field: str) -> int | None:
    """A field of /proc/self/io (read_bytes, write_bytes: what this process's threads caused to
    reach block devices); None where unreadable."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key == field:
                    return int(value)
    except OSError:
        return None
    return None


def _delta(before: int | None, field: str) -> int | None:
    after = io_counter(field)
    return after - before if before is not None and after is not None else None


def _dcp(call, state: dict[str, Any], what: str, target: Target, name: str, group: Any, io: Any) -> float:
    """``call`` (dcp.save or dcp.load) on ``state`` with ``io``; its seconds. A failure comes out as
    the destination's own CheckpointError (DCP wraps it), or one that names the checkpoint and where."""
    kind = "storage_writer" if call is dcp.save else "storage_reader"
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # DCP's "assuming the intent is ... a single process"
        try:
            call(
                state,
                checkpoint_id=target.checkpoint_id(name),
                process_group=group,
                no_dist=group is None and not _initialized(),
                **{kind: io},
            )
        except BaseException as exc:  # DCP's CheckpointException is a BaseException
            inner = cause(exc)
            if call is dcp.save:
                target.abort(target.checkpoint_id(name))
            if isinstance(inner, CheckpointError):
                raise inner from None
            raise CheckpointError(f"{what} {name} ({target.where}): {inner}") from None
    return time.perf_counter() - t0


def timed_save(target: Target, state: dict[str, Any], name: str, group: Any = None) -> Timed:
    writer = target.writer()
    before = io_counter("write_bytes")
    seconds = _dcp(dcp.save, state, "saving", target, name, group, writer)
    sync_s = getattr(getattr(writer, "totals", None), "sync_s", 0.0)
    return Timed(
        seconds, state_bytes(state), target.requests(writer), _delta(before, "write_bytes"), sync_s=sync_s
    )


def timed_load(
    target: Target, like: dict[str, Any], name: str, *, cold: bool, group: Any = None
) -> tuple[Timed, dict[str, Any]]:
    """Restore checkpoint ``name`` into a fresh state shaped like ``like``; ``cold``: this host's
    cached copy dropped first."""
    how = target.make_cold(target.checkpoint_id(name)) if cold else None
    out = empty_like_state(like)
    reader = target.reader()
    before = io_counter("read_bytes")
    seconds = _dcp(dcp.load, out, "restoring", target, name, group, reader)
    timed = Timed(seconds, state_bytes(out), target.requests(reader), _delta(before, "read_bytes"), cold=how)
    return timed, out


def _initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()
