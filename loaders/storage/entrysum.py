"""What a shard-cache entry's bytes were when it was filled, and the check of an entry against it.

At fill the cache reads the downloaded file once, in 8 MiB parts, and from that one pass takes
what the store's own checksum needs (the MD5 of a single-part ETag, the sha256 a dataset's
manifest records) and an XXH3-64 of every part. The download is checked against the store's
checksum there; the parts' hashes and the size are written beside the entry (``.sums/<key>``) and
are what a process checks the entry against when it first opens it.

Why a fast non-cryptographic hash per part, not the sha256 again: the check runs once per reading
process on every entry it opens, on the warm path. On this kind of core sha256 runs at 1.1-1.8 GB/s
(SHA instructions), zlib's CRC-32 at 3.6-4.3 GB/s and XXH3-64 at ~16 GB/s; with CRC-32 a reader
that does not decode lost a quarter of its rate, a decoding one ~3 % (docs/benchmarks.md). What it
guards against is damage after the fill (a torn write, a bad sector, another program writing the
file), not an adversary: a 64-bit hash misses random damage to a part once in 2^64. Parts also
say where the damage is, and let a reader of a byte range check only the parts it reads.

The standard library and xxhash only: child processes import this without the rest of ``loaders``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass

from xxhash import xxh3_64, xxh3_64_intdigest

PART_BYTES = 8 * 2**20
_READ = 2**20


@dataclass(frozen=True)
class EntrySum:
    """An entry's size and the XXH3-64 of each of its ``part_bytes`` parts, as filled; ``checked``:
    what the fill checked the download against ("sha256", "etag-md5", or "size" alone)."""

    size: int
    part_bytes: int
    xxh3: tuple[int, ...]
    checked: str
    filled_ns: int  # when: tells a refilled entry from the one a process checked before

    def parts(self, start: int = 0, end: int | None = None) -> range:
        """The numbers of the parts that hold bytes ``[start, end)``."""
        end = self.size if end is None else min(end, self.size)
        if end <= start:
            return range(0)
        return range(start // self.part_bytes, -(-end // self.part_bytes))

    def span(self, part: int) -> tuple[int, int]:
        """Bytes [begin, end) of part ``part``."""
        begin = part * self.part_bytes
        return begin, min(self.size, begin + self.part_bytes)

    def dumps(self) -> str:
        return json.dumps({**asdict(self), "xxh3": list(self.xxh3)})

    @classmethod
    def loads(cls, text: str) -> EntrySum:
        raw = json.loads(text)
        return cls(
            size=int(raw["size"]),
            part_bytes=int(raw["part_bytes"]),
            xxh3=tuple(int(c) for c in raw["xxh3"]),
            checked=str(raw["checked"]),
            filled_ns=int(raw["filled_ns"]),
        )


@dataclass(frozen=True)
class Digests:
    """One pass over a filled file: its parts' XXH3-64s and the whole-file digests asked for."""

    size: int
    xxh3: tuple[int, ...]
    md5: str | None
    sha256: str | None


def digests(path: str, *, md5: bool = False, sha256: bool = False) -> Digests:
    """Read ``path`` once: the XXH3-64 of every ``PART_BYTES`` part, and its MD5 and sha256 if asked."""
    whole = [h for h, want in ((hashlib.md5(usedforsecurity=False), md5), (hashlib.sha256(), sha256)) if want]
    parts: list[int] = []
    part, in_part, size = xxh3_64(), 0, 0
    buf = bytearray(_READ)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            chunk = view[:n]
            for h in whole:
                h.update(chunk)
            size += n
            while chunk:  # a read may straddle a part's end
                take = min(len(chunk), PART_BYTES - in_part)
                part.update(chunk[:take])
                in_part += take
                chunk = chunk[take:]
                if in_part == PART_BYTES:
                    parts.append(part.intdigest())
                    part, in_part = xxh3_64(), 0
    if in_part or not parts:
        parts.append(part.intdigest())
    found = {h.name: h.hexdigest() for h in whole}
    return Digests(size, tuple(parts), found.get("md5"), found.get("sha256"))


def damaged_parts(data: memoryview, summed: EntrySum, parts: range) -> list[int]:
    """The parts among ``parts`` whose bytes in ``data`` (the whole entry) differ from ``summed``."""
    bad = []
    for part in parts:
        begin, end = summed.span(part)
        if xxh3_64_intdigest(data[begin:end]) != summed.xxh3[part]:
            bad.append(part)
    return bad


def write_sum(path: str, summed: EntrySum) -> None:
    """``summed`` at ``path``, whole or not at all (a temp file renamed into place)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(summed.dumps())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def read_sum(path: str) -> EntrySum | None:
    """The sum recorded at ``path``; None when there is none or it cannot be read as one."""
    try:
        with open(path) as f:
            return EntrySum.loads(f.read())
    except (OSError, ValueError, KeyError, TypeError):
        return None
