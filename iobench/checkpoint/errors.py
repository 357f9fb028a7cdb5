"""What can go wrong with a checkpoint, each error saying where, how much and what to do.

DCP wraps a rank's failure in a ``CheckpointException`` (a BaseException holding every failed
rank's exception); :func:`cause` digs ours back out so the message a user reads is the tier's."""

from __future__ import annotations

import errno

from iobench.host.units import format_bytes


class CheckpointError(Exception):
    """A checkpoint could not be saved or restored; the message says where and what to do."""


class TierFull(CheckpointError):
    """The tier ran out of space (or quota) in the middle of a save."""

    def __init__(self, where: str, written: int, total: int, path: str) -> None:
        super().__init__(
            f"{where} is full: the save wrote {format_bytes(written)} of {format_bytes(total)} "
            f"({path}) before the device said no space left; nothing of this checkpoint was committed "
            "and its partial files are removed, so the previous checkpoint is intact and loadable. Free "
            "space on the tier, keep fewer checkpoints, or write them to a larger tier"
        )
        self.where, self.written, self.total = where, written, total


class EndpointFailed(CheckpointError):
    """An object store stopped answering in the middle of a save or a restore."""


class CheckpointMissing(CheckpointError):
    """No committed checkpoint where one was asked for."""


class CheckpointCorrupt(CheckpointError):
    """A committed checkpoint's file is shorter than its metadata says, or its bytes fail their
    checksum: the message names the file, the shard and the byte range."""


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def cause(exc: BaseException) -> BaseException:
    """The first rank's own exception inside DCP's CheckpointException (itself otherwise)."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        first = failures[min(failures)]
        inner = first[0] if isinstance(first, tuple) else first
        return cause(inner) if isinstance(inner, BaseException) else exc
    return exc
