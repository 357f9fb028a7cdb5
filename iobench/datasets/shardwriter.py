"""Samples into a dataset's shard files, in any shard format: a shard rolls over before it would
exceed ``shard_bytes`` (a shard always holds at least one sample, so one sample larger than the
limit still fits), and each is published atomically (temp file + rename) with its sha256 computed
while it is written, and the files its format puts beside it (a tar's DALI index).

What a shard holds, byte for byte, is its format's writer's (loaders.formats: tar, Parquet); this
module is the dataset around it: files, names, checksums, the manifest's entries.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from iobench.datasets.manifest import ShardEntry
from iobench.host.atomic import atomic_write
from loaders.formats import FormatWriter, format_named, member_bytes, writer_class

__all__ = ["ShardWriter", "member_bytes"]  # member_bytes: synth.py sizes tar shards with it

SHARD_STEM = "train-{:06d}"


class _HashingSink:
    """Hashes and counts while a format's writer writes, so a shard is never read back to checksum
    it. Closing it leaves the file open: the atomic writer owns it (pyarrow closes its sink)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()
        self.pos = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        self._raw.write(data)
        self.sha.update(data)
        self.pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        self.closed = True


class ShardWriter:
    """Append samples, ``add(key, [(ext, data), ...])``, as shards of ``format`` ("wds": tar + DALI
    index; "parquet") named ``train-NNNNNN<suffix>`` in ``out_dir``; ``options`` are the format
    writer's (Parquet: ``row_group``). Use as a context manager: leaving it publishes the shard in
    progress, an exception (or ``abort()``) discards it. ``entries`` lists the shards published."""

    def __init__(self, out_dir: str | Path, shard_bytes: int, *, format: str = "wds", **options: Any) -> None:
        if shard_bytes <= 0:
            raise ValueError(f"shard_bytes must be positive, got {shard_bytes}")
        self.out_dir, self.shard_bytes, self.options = Path(out_dir), shard_bytes, options
        self.pattern = SHARD_STEM + format_named(format).suffix
        self._writer_class = writer_class(format)
        self.entries: list[ShardEntry] = []
        self._stack: contextlib.ExitStack | None = None
        self._sink: _HashingSink | None = None
        self._writer: FormatWriter | None = None
        self._name = ""

    def add(self, key: str, members: list[tuple[str, bytes]]) -> None:
        if self._writer is not None and self._writer.size_with(key, members) > self.shard_bytes:
            self._finish_shard()
        if self._writer is None:
            self._open_shard()
        assert self._writer is not None
        self._writer.add(key, members)

    def close(self) -> list[ShardEntry]:
        if self._writer is not None and self._writer.samples == 0:
            self.abort()  # its every sample was refused: nothing to publish
        if self._writer is not None:
            self._finish_shard()
        return self.entries

    def abort(self) -> None:
        """Drop the shard in progress; its temporary file is removed, nothing is published."""
        if self._stack is not None:
            stack, self._stack, self._writer = self._stack, None, None
            with contextlib.suppress(_Abort):
                stack.__exit__(_Abort, _Abort(), None)

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _open_shard(self) -> None:
        self._name = self.pattern.format(len(self.entries))
        stack = contextlib.ExitStack()
        self._sink = _HashingSink(stack.enter_context(atomic_write(self.out_dir / self._name, "wb")))
        self._stack = stack
        self._writer = self._writer_class(self._sink, **self.options)

    def _finish_shard(self) -> None:
        assert self._writer is not None and self._stack is not None and self._sink is not None
        beside = self._writer.close()
        size, samples = self._sink.pos, self._writer.samples
        if size > self.shard_bytes and samples > 1:  # the roll-over estimate must be a bound
            raise RuntimeError(f"shard {self._name} of {size} bytes exceeds shard_bytes={self.shard_bytes}")
        stack, self._stack, self._writer = self._stack, None, None
        stack.close()  # fsync + rename: the shard becomes visible only now, complete
        path = self.out_dir / self._name
        for suffix, data in beside.items():
            with atomic_write(path.with_suffix(suffix), "wb") as f:
                f.write(data)
        self.entries.append(ShardEntry(self._name, size, samples, self._sink.sha.hexdigest()))


class _Abort(Exception):
    """Raised into the atomic writer to make it discard the temporary file."""
