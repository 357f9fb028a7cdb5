"""Streaming tar reading: members in order, grouped into samples, never extracted by name.

The reader parses the 512-byte headers itself so that every error can name the shard and the
byte offset, and so that every byte taken from the storage is counted and timed.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from loaders.formats.base import DEFAULT_MAX_MEMBER_BYTES, ReadCounter, Sample, ShardFormatError
from loaders.observe.stages import clocks, since

BLOCK = 512
READ_CHUNK = 4 * 2**20
META_MAX_BYTES = 2**20  # pax headers and GNU long names: a few hundred bytes in any real tar
# a member up to this size comes in one read with its padding and the next header, and is sliced
# out of it: copying a label or a small image once more costs less than another read
SMALL_MEMBER = 16 * 2**10
_ZERO_BLOCK = bytes(BLOCK)
# a tar ends with two zero blocks padded to a 10 KiB record: a zero block this close to the end of
# a shard is its end, and what follows it is not read
END_SLACK = 10240 + 2 * BLOCK
SCAN_CHUNK = 64 * 2**10  # what a resync reads at a time looking for the next header
_NONZERO = re.compile(rb"[^\x00]")

# a regular member as iter_members yields it: (name, where its headers begin, where its data begins,
# its data, where its padding ends)
Member = tuple[str, int, int, bytes, int]


class ByteStream(Protocol):
    """What the tar reader reads from: a file, a response body, a range of a shard (ArchiveRange)."""

    def read(self, n: int, /) -> bytes: ...


class _ExactReader:
    """Reads exactly n bytes (fewer only at the end of the stream), counting them; ``at``: where in
    the shard the next byte comes from. Bytes given back (``unread``) are read again first."""

    def __init__(self, raw: ByteStream, counter: ReadCounter, at: int = 0) -> None:
        self.raw, self.counter, self.at = raw, counter, at
        self.pending = b""

    def read_exact(self, n: int) -> bytes:
        if self.pending:  # only after a resync
            data, self.pending = self.pending[:n], self.pending[n:]
            self.at += len(data)
            if len(data) < n:
                data += self._read(n - len(data))
            return data
        return self._read(n)

    def unread(self, data: bytes) -> None:
        self.pending = data + self.pending
        self.at -= len(data)

    def _read(self, n: int) -> bytes:
        # bounded reads: a buffered file allocates what read() asks for before it has the bytes,
        # so asking for a member's declared size would let a 1 kB shard claim 256 MiB
        data = self.raw.read(min(n, READ_CHUNK))
        if 0 < len(data) < n:  # a member over READ_CHUNK, or a stream returning short reads
            chunks, got = [data], len(data)
            while got < n:
                chunk = self.raw.read(min(n - got, READ_CHUNK))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            data = b"".join(chunks)
        self.counter.bytes += len(data)
        self.at += len(data)
        return data


def _octal(field_: bytes) -> int | None:
    """A numeric header field; None when it is not a number (or is negative)."""
    if field_[:1] == b"\x80":  # GNU base-256 for sizes over 8 GiB (0xff would be negative)
        return int.from_bytes(field_[1:], "big")
    text = field_.rstrip(b"\0 ").lstrip(b" ")
    if not text:
        return 0
    if text.strip(b"01234567"):
        return None
    return int(text, 8)


def _checksum_ok(header: bytes) -> bool:
    """The header's sum of bytes, its checksum field counted as spaces, equals that field, exactly.

    The sum comes from zlib's Adler-32, whose low half is 1 + the sum of the bytes modulo 65521,
    taken over each half of the block: 256 bytes add up to 65,280 at most, below the modulus, so
    each half's sum is exact, at a sixth of the cost of ``sum(header)`` on every member.
    """
    field_ = header[148:156]
    stored = _octal(field_)
    if stored is None:
        return False
    total = (zlib.adler32(header[:256]) & 0xFFFF) + (zlib.adler32(header[256:]) & 0xFFFF) - 2
    return total - sum(field_) + 8 * 32 == stored


def _fields(header: bytes, url: str, at: int) -> tuple[str, int, bytes]:
    """(name, size, type flag) of a whole tar header that is not the end-of-archive block; a
    corrupt one is a ShardFormatError at ``at``."""
    if not _checksum_ok(header):
        raise ShardFormatError(url, at, "tar header checksum mismatch (corrupt or not a tar)")
    size = _octal(header[124:136])
    if size is None:
        raise ShardFormatError(url, at, "tar header size field is not an octal number")
    name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "replace")
    if header[345] and header[257:262] == b"ustar":  # a ustar prefix, NUL-terminated like the name
        name = header[345:500].split(b"\0", 1)[0].decode("utf-8", "replace") + "/" + name
    return name, size, header[156:157]


def _pax_path(data: bytes) -> str | None:
    """The ``path`` record of a pax extended header ("<length> <key>=<value>\n" records); raises
    ValueError on a malformed record (a zero length would otherwise loop forever)."""
    path = None
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 20)
        digits = data[pos:space] if space > pos else b""
        if not digits.isdigit():
            raise ValueError(f"pax record at {pos} does not start with its length")
        end = pos + int(digits)
        if end <= space + 1 or end > len(data) or data[end - 1 : end] != b"\n":
            raise ValueError(f"pax record at {pos} declares length {int(digits)}")
        key, _, value = data[space + 1 : end - 1].partition(b"=")
        if key == b"path":
            path = value.decode("utf-8", "replace")
        pos = end
    return path


@dataclass(frozen=True)
class Gap:
    """Bytes ``[begin, end)`` of a shard skipped as damaged: from the headers of the member where
    the damage was found to the next header found whole (or the shard's end); ``problem``: what
    was wrong there."""

    begin: int
    end: int
    problem: str
    final: bool = False  # no whole header after it: the rest of the shard is lost


# the offsets of a shard's samples' headers (from its index), asked for once damage is found; None
# where the shard has no index: then the next header is found by scanning for a whole one
Landmarks = Callable[[], Sequence[int] | None]


class _Damage(ShardFormatError):
    """A member that cannot be read; ``tail``: bytes already read past it (the next header)."""

    tail = b""


def _member(
    reader: _ExactReader, header: bytes, url: str, max_member_bytes: int
) -> tuple[str, bytes, int, bytes, bytes, str | None] | None:
    """The member whose header is ``header`` (the bytes last read): (name, type flag, where its
    data begins, its data, the next header, the name a pax or GNU long-name member gives the
    next); None at a zero block."""
    header_at = reader.at - len(header)
    if len(header) == 0:
        raise _Damage(url, header_at, "shard ends without the tar end-of-archive marker (truncated?)")
    if len(header) < BLOCK:
        raise _Damage(url, header_at, f"truncated tar header ({len(header)} of 512 bytes)")
    if header == _ZERO_BLOCK:
        return None
    name, size, kind = _fields(header, url, header_at)
    # checked before a byte is read: a declared size allocates nothing
    limit = META_MAX_BYTES if kind in (b"x", b"L") else max_member_bytes
    if size > limit:
        raise _Damage(url, header_at, f"member declares {size} bytes, over the {limit}-byte limit")
    data_at = header_at + BLOCK
    padding = -size % BLOCK
    if size <= SMALL_MEMBER:
        rest = reader.read_exact(size + padding + BLOCK)
        data, rest = rest[:size], rest[size:]
    else:
        data = reader.read_exact(size)
        rest = reader.read_exact(padding + BLOCK) if len(data) == size else b""
    if len(data) < size:
        raise _Damage(
            url, data_at, f"member {name!r} declares {size} bytes but only {len(data)} follow (truncated)"
        )
    if len(rest) < padding:
        raise _Damage(
            url, data_at, f"member {name!r} is whole but the shard ends inside its padding (truncated)"
        )
    long_name = None
    if kind in (b"x", b"L"):  # pax / GNU long name for the next member
        try:
            long_name = _pax_path(data) if kind == b"x" else data.rstrip(b"\0").decode("utf-8", "replace")
        except ValueError as exc:
            damage = _Damage(url, data_at, f"malformed pax extended header: {exc}")
            damage.tail = rest[padding:]
            raise damage from None
    return name, kind, data_at, data, rest[padding:], long_name


def iter_members(
    raw: ByteStream,
    url: str,
    counter: ReadCounter,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    at: int = 0,
    resync: Landmarks | None = None,
    size: int | None = None,
) -> Iterator[Member | Gap]:
    """Yield every regular file member of a tar stream (:data:`Member`), which starts at byte
    ``at`` of the shard (a part of it read by range: offsets stay the shard's). A member's headers
    begin at its pax or long-name header when it has one.

    A large member's data is read on its own, exactly its size, so the bytes yielded are the bytes
    read (slicing them out of a padded block would copy every image once more); its padding comes
    in the same read as the next header. ``counter`` counts the bytes; the caller times the calls.

    Damage (a header that is not one, a shard cut short, zeroed blocks with data after them) is a
    ShardFormatError naming the shard and the byte; with ``resync`` the reader finds its place
    again instead (the next sample's header from the index, else the next whole header) and
    yields a :class:`Gap` for what it skipped. A zero block within a record of the shard's ``size``
    (where known) is its end; elsewhere what follows it is looked at first (zeros to the end: the
    end; data: zeroed damage, which read as the end before).
    """
    reader = _ExactReader(raw, counter, at)
    long_name: str | None = None
    begin = at
    header = reader.read_exact(BLOCK)
    while True:
        header_at = reader.at - len(header)
        try:
            found = _member(reader, header, url, max_member_bytes)
            ends = size is not None and size - header_at <= END_SLACK
            if found is None and not ends and _after_zeros(reader):  # data after it: damage
                raise _Damage(
                    url,
                    header_at,
                    "zeroed blocks where a tar header belongs (they read as the end-of-archive marker), "
                    "with tar data after them",
                )
        except ShardFormatError as damage:
            if resync is None:
                raise
            reader.unread(getattr(damage, "tail", b""))
            header = _next_header(reader, resync)
            yield Gap(begin, reader.at - len(header), damage.problem or "damaged", final=not header)
            long_name, begin = None, reader.at - len(header)
            if not header:
                return
            continue
        if found is None:
            return  # end-of-archive; the second zero block and padding are not needed
        name, kind, data_at, data, header, named = found
        if kind in (b"x", b"L"):
            long_name = named
            continue
        if kind not in (b"0", b"\0", b"7"):
            long_name, begin = None, reader.at - len(header)
            continue  # directories, links, devices: never followed, never created
        yield (long_name or name), begin, data_at, data, reader.at - len(header)
        long_name, begin = None, reader.at - len(header)


def _plausible(block: bytes) -> bool:
    """A whole tar header: named, its checksum right, its size a number."""
    return (
        len(block) == BLOCK and block[0] != 0 and _checksum_ok(block) and _octal(block[124:136]) is not None
    )


def _after_zeros(reader: _ExactReader) -> bool:
    """Past a zero block: False where only zeros follow to the end (the archive's end); True where
    data follows (damage: zeroed blocks, then data), its first block given back to the reader."""
    while chunk := reader.read_exact(SCAN_CHUNK):
        found = _NONZERO.search(chunk)
        if found is not None:
            reader.unread(chunk[found.start() // BLOCK * BLOCK :])
            return True
    return False


def _next_header(reader: _ExactReader, landmarks: Landmarks) -> bytes:
    """The next whole header at or after the reader's position, as the bytes last read (b"" at
    the shard's end): at the next sample the index places there, else by scanning block by block."""
    marks = landmarks()
    if marks:
        for mark in marks:
            if mark < reader.at:
                continue
            while reader.at < mark:
                if not reader.read_exact(min(mark - reader.at, READ_CHUNK)):
                    return b""
            block = reader.read_exact(BLOCK)
            if _plausible(block):
                return block
        while reader.read_exact(READ_CHUNK):  # the index knows of no sample after the damage
            pass
        return b""
    return _scan(reader)


def _scan(reader: _ExactReader) -> bytes:
    """The next whole header found block by block, as the bytes last read (b"" at the end)."""
    if reader.at % BLOCK:  # headers lie on block boundaries of the shard
        reader.read_exact(BLOCK - reader.at % BLOCK)
    while chunk := reader.read_exact(SCAN_CHUNK):
        at = 0
        while (found := _NONZERO.search(chunk, at)) is not None:
            at = found.start() // BLOCK * BLOCK
            if _plausible(chunk[at : at + BLOCK]):
                reader.unread(chunk[at + BLOCK :])
                return chunk[at : at + BLOCK]
            at += BLOCK
    return b""


def split_key(name: str) -> tuple[str, str]:
    """webdataset's rule: the key is everything before the first dot of the last path part."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot < 0:
        return name, ""
    return name[:dot], name[dot + 1 :].lower()


class Resync(Protocol):
    """How a reader goes on past damage: where the shard's samples begin (its index, if it has one),
    and what to do with a gap found (say what was lost; the sample read when it was found)."""

    def landmarks(self) -> Sequence[int] | None:
        """The offsets of the shard's samples' headers, ascending; None where not known."""
        ...

    def size(self) -> int | None:
        """The shard's size in bytes, where known."""
        ...

    @property
    def skips(self) -> bool:
        """Whether damage is skipped (and told to :meth:`found`), or a ShardFormatError."""
        ...

    def found(self, gap: Gap, current: Sample | None, upcoming: int) -> tuple[bool, int]:
        """``gap`` was skipped while ``current`` (not yet yielded: its members may not all have been
        read) was being read, the next sample to be numbered ``upcoming``. Returns whether
        ``current`` is whole (it is yielded) and the number of the sample after the gap."""
        ...


def iter_samples(
    raw: ByteStream,
    url: str,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    at: int = 0,
    first: int = 0,
    resync: Resync | None = None,
) -> Iterator[Sample]:
    """Group consecutive members sharing a key into samples, with the bytes and time each cost.

    A sample is whole once the next sample's first member is read, so each sample is charged the
    reading from the end of the previous one up to then (the shard's last sample: up to its end);
    the clocks run once per sample, and never while the consumer holds it. ``at``: where in the
    shard ``raw`` starts (:func:`iter_members`); ``first``: the index of its first sample.
    ``resync``: the shard's size (where a zero block is its end) and, where it ``skips``, going on
    past damage (told of each gap) rather than failing with a ShardFormatError.
    """
    counter = ReadCounter()
    current: Sample | None = None
    charged = 0
    start = clocks()
    index = first

    def close(sample: Sample) -> Sample:
        nonlocal charged
        sample.read_bytes, charged = counter.bytes - charged, counter.bytes
        sample.fetch_wall_s, sample.fetch_cpu_s = since(start)
        return sample

    landmarks = resync.landmarks if resync is not None and resync.skips else None
    size = resync.size() if resync is not None else None
    for member in iter_members(raw, url, counter, max_member_bytes, at, landmarks, size):
        if isinstance(member, Gap):
            assert resync is not None  # gaps are found only where resync gave landmarks
            whole, index = resync.found(member, current, index + (current is not None))
            if current is not None and whole:
                yield close(current)
                start = clocks()
            current = None
            continue
        name, begin, data_at, data, end = member
        key, ext = split_key(name)
        if current is not None and key != current.key:
            yield close(current)
            start = clocks()
            current = None
            index += 1
        if current is None:
            current = Sample(key=key, url=url, offset=data_at - BLOCK, index=index, span=(begin, end))
        current.parts[ext] = data
        current.span = (current.span[0], end)
    if current is not None:
        current.final = True
        yield close(current)


def count_tar_samples(path: str) -> int:
    """The samples of a local tar shard, from its headers alone: the data is seeked over, so a
    128 MB shard costs a few hundred 512-byte reads. Raises ShardFormatError like the reader."""
    count, last_key = 0, None
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        at = 0
        long_name: str | None = None
        while True:
            f.seek(at)
            header = f.read(BLOCK)
            if len(header) < BLOCK:
                raise ShardFormatError(
                    path, at, "shard ends without the tar end-of-archive marker (truncated?)"
                )
            if header == _ZERO_BLOCK:
                if end - at > END_SLACK and _data_after(f):
                    raise ShardFormatError(
                        path, at, "zeroed blocks where a tar header belongs, with tar data after them"
                    )
                return count
            name, size, kind = _fields(header, path, at)
            data_at = at + BLOCK
            if data_at + size > end:
                raise ShardFormatError(
                    path,
                    data_at,
                    f"member {name!r} declares {size} bytes but only {end - data_at} follow (truncated)",
                )
            at = data_at + size + (-size % BLOCK)
            if kind in (b"x", b"L"):
                if size > META_MAX_BYTES:
                    raise ShardFormatError(path, data_at, f"member declares {size} bytes, over the limit")
                data = f.read(size)
                try:
                    long_name = (
                        _pax_path(data) if kind == b"x" else data.rstrip(b"\0").decode("utf-8", "replace")
                    )
                except ValueError as exc:
                    raise ShardFormatError(path, data_at, f"malformed pax extended header: {exc}") from None
                continue
            if kind not in (b"0", b"\0", b"7"):
                long_name = None
                continue
            key = split_key(long_name or name)[0]
            long_name = None
            if key != last_key:
                count, last_key = count + 1, key


def _data_after(f: BinaryIO) -> bool:
    """Whether anything but zeros follows in ``f`` (zeroed damage, not the archive's end)."""
    while chunk := f.read(SCAN_CHUNK):
        if _NONZERO.search(chunk):
            return True
    return False
