"""Writing tar (WebDataset) shards, beside their reader: deterministic members and the shard's
DALI index (format v1.2, the index tar_index.py reads), made from what was written rather than by
reading the shard back.

Byte-identical output for identical input needs every header field pinned: USTAR format, mtime 0,
uid/gid 0, empty user/group names, mode 0644, members in the order given.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from typing import BinaryIO

from loaders.formats.tar_index import VERSION

_BLOCK = tarfile.BLOCKSIZE  # 512
_RECORD = tarfile.RECORDSIZE  # 10240: tarfile pads the archive to a whole record on close


def member_bytes(size: int) -> int:
    """Bytes one USTAR member takes: a header block plus data padded to whole blocks."""
    return _BLOCK + -(-size // _BLOCK) * _BLOCK


def archive_bytes(members_total: int) -> int:
    """Final tar size for members taking ``members_total`` bytes: two zero blocks, record pad."""
    return -(-(members_total + 2 * _BLOCK) // _RECORD) * _RECORD


def index_component(name: str, data_offset: int, size: int) -> tuple[str, str] | None:
    """(sample base, its index entry ``<ext> <data offset> <size> <name>``) of a regular member, or
    None for one the index leaves out (no extension, no base); the split is webdataset's, at the
    first ``.`` after the last ``/``. ValueError for a name the format cannot hold (whitespace)."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot < 0:
        return None
    base, ext = name[:dot], name[dot + 1 :]
    if not base or base.endswith("/"):
        return None
    if any(c.isspace() for c in name):
        raise ValueError(
            f"member name {name!r} contains whitespace, which the DALI index format cannot represent"
        )
    return base, f"{ext} {data_offset} {size} {name}"


def index_text(samples: Sequence[Sequence[str]]) -> str:
    """The index file: its first line, then one line of member entries per sample."""
    return "\n".join([f"{VERSION} {len(samples)}", *(" ".join(s) for s in samples)]) + "\n"


class TarWriter:
    """:class:`loaders.formats.base.FormatWriter` for tar shards: ``key.ext`` members in the order
    given, and the index (``.idx``) that goes beside the shard."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream, self._start = stream, stream.tell()
        self._tar = tarfile.open(fileobj=stream, mode="w", format=tarfile.USTAR_FORMAT)  # noqa: SIM115
        self._total = 0  # bytes the members take
        self._index: list[list[str]] = []
        self._last_base: str | None = None
        self.samples = 0

    def size_with(self, key: str, members: Sequence[tuple[str, bytes]]) -> int:
        return archive_bytes(self._total + sum(member_bytes(len(data)) for _, data in members))

    def add(self, key: str, members: Sequence[tuple[str, bytes]]) -> None:
        at, entries = self._total, []
        for ext, data in members:  # every name checked before a byte is written
            entries.append(index_component(f"{key}.{ext}", at + _BLOCK, len(data)))
            at += member_bytes(len(data))
        for (ext, data), entry in zip(members, entries, strict=True):
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            self._tar.addfile(info, io.BytesIO(data))
            if entry is not None:
                base, component = entry
                if base != self._last_base:
                    self._index.append([])
                    self._last_base = base
                self._index[-1].append(component)
        self._total = at
        self.samples += 1

    def close(self) -> dict[str, bytes]:
        self._tar.close()
        written, expected = self._stream.tell() - self._start, archive_bytes(self._total)
        if written != expected:  # the roll-over rule relies on this arithmetic being exact
            raise RuntimeError(f"tar size {written} differs from predicted {expected}")
        return {".idx": index_text(self._index).encode("ascii")}
