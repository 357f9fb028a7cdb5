"""Deterministic WebDataset tar shards, each published atomically with its DALI index.

Byte-identical output for identical input needs every header field pinned: USTAR format,
mtime 0, uid/gid 0, empty user/group names, mode 0644, members in the order given.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import tarfile
from pathlib import Path
from types import TracebackType
from typing import IO

from iobench.datasets.manifest import SHARD_PATTERN, ShardEntry
from iobench.datasets.wdsindex import write_wds_index
from iobench.host.atomic import atomic_write

_BLOCK = tarfile.BLOCKSIZE  # 512
_RECORD = tarfile.RECORDSIZE  # 10240: tarfile pads the archive to a whole record on close


def member_bytes(size: int) -> int:
    """Bytes one USTAR member takes: a header block plus data padded to whole blocks."""
    return _BLOCK + -(-size // _BLOCK) * _BLOCK


def archive_bytes(members_total: int) -> int:
    """Final tar size for members taking ``members_total`` bytes: two zero blocks, record pad."""
    return -(-(members_total + 2 * _BLOCK) // _RECORD) * _RECORD


class _HashingWriter:
    """Hashes while tarfile writes, so a shard is never read back just to checksum it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()
        self.pos = 0

    def write(self, data: bytes) -> int:
        self._raw.write(data)
        self.sha.update(data)
        self.pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self.pos


class ShardWriterBase:
    """What every shard writer shares: closing publishes the shard in progress, aborting (or an
    exception inside ``with``) discards its temporary file. Subclasses keep the open shard's
    ExitStack in ``_stack`` and implement ``_finish_shard`` and ``_drop_handle``."""

    _stack: contextlib.ExitStack | None = None

    def __init__(self, out_dir: str | Path, shard_bytes: int, pattern: str) -> None:
        if shard_bytes <= 0:
            raise ValueError(f"shard_bytes must be positive, got {shard_bytes}")
        self.out_dir = Path(out_dir)
        self.shard_bytes = shard_bytes
        self.pattern = pattern
        self.entries: list[ShardEntry] = []
        self.payload_bytes = 0  # sum of sample payload sizes, for mean-size facts

    def _finish_shard(self) -> None:
        raise NotImplementedError

    def _drop_handle(self) -> None:
        """Forget the format's writer object of the shard being discarded."""
        raise NotImplementedError

    def close(self) -> list[ShardEntry]:
        if self._stack is not None:
            self._finish_shard()
        return self.entries

    def abort(self) -> None:
        """Drop the shard in progress; its temporary file is removed, nothing is published."""
        if self._stack is not None:
            stack, self._stack = self._stack, None
            self._drop_handle()
            with contextlib.suppress(_Abort):
                stack.__exit__(_Abort, _Abort(), None)

    def __enter__(self):
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class ShardWriter(ShardWriterBase):
    """Append samples; shards roll over before they would exceed ``shard_bytes``.

    A sample is ``(key, [(ext, data), ...])`` and becomes members ``key.ext`` in that order.
    A shard always holds at least one sample, so one sample larger than the limit still fits.
    Use as a context manager; ``entries`` lists the shards published so far.
    """

    def __init__(
        self,
        out_dir: str | Path,
        shard_bytes: int,
        *,
        pattern: str = SHARD_PATTERN,
        write_index: bool = True,
    ) -> None:
        super().__init__(out_dir, shard_bytes, pattern)
        self.write_index = write_index
        self._tar: tarfile.TarFile | None = None
        self._hasher: _HashingWriter | None = None
        self._members_total = 0
        self._samples = 0

    def add(self, key: str, members: list[tuple[str, bytes]]) -> None:
        need = sum(member_bytes(len(data)) for _, data in members)
        if self._tar is not None and archive_bytes(self._members_total + need) > self.shard_bytes:
            self._finish_shard()
        if self._tar is None:
            self._open_shard()
        assert self._tar is not None
        for ext, data in members:
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            self._tar.addfile(info, io.BytesIO(data))
            self.payload_bytes += len(data)
        self._members_total += need
        self._samples += 1

    def _drop_handle(self) -> None:
        self._tar = None

    def _open_shard(self) -> None:
        name = self.pattern.format(len(self.entries))
        self._name = name
        stack = contextlib.ExitStack()
        raw = stack.enter_context(atomic_write(self.out_dir / name, "wb"))
        self._hasher = _HashingWriter(raw)
        # Stays open across add() calls; _finish_shard closes it.
        self._tar = tarfile.open(  # noqa: SIM115
            fileobj=self._hasher,  # type: ignore[arg-type]
            mode="w",
            format=tarfile.USTAR_FORMAT,
        )
        self._stack = stack
        self._members_total = 0
        self._samples = 0

    def _finish_shard(self) -> None:
        assert self._tar is not None and self._stack is not None and self._hasher is not None
        self._tar.close()
        size = self._hasher.pos
        expected = archive_bytes(self._members_total)
        if size != expected:  # the roll-over rule relies on this arithmetic being exact
            raise RuntimeError(f"tar size {size} differs from predicted {expected}")
        stack, self._stack, self._tar = self._stack, None, None
        stack.close()  # fsync + rename: the shard becomes visible only now, complete
        path = self.out_dir / self._name
        if self.write_index:
            write_wds_index(path)
        self.entries.append(ShardEntry(self._name, size, self._samples, self._hasher.sha.hexdigest()))


class _Abort(Exception):
    """Raised into the atomic writer to make it discard the temporary file."""
