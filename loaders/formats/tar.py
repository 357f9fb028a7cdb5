"""Streaming tar reading: members in order, grouped into samples, never extracted by name.

The reader parses the 512-byte headers itself so that every error can name the shard and the
byte offset, and so that every byte taken from the storage is counted and timed.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from loaders.formats.base import DEFAULT_MAX_MEMBER_BYTES, ReadCounter, Sample, ShardFormatError
from loaders.observe.stages import clocks, since

BLOCK = 512
READ_CHUNK = 4 * 2**20
META_MAX_BYTES = 2**20  # pax headers and GNU long names: a few hundred bytes in any real tar
# a member up to this size comes in one read with its padding and the next header, and is sliced
# out of it: copying a label or a small image once more costs less than another read
SMALL_MEMBER = 16 * 2**10
_ZERO_BLOCK = bytes(BLOCK)

# a regular member as iter_members yields it: (name, where its headers begin, where its data begins,
# its data, where its padding ends)
Member = tuple[str, int, int, bytes, int]


class _ExactReader:
    """Reads exactly n bytes (fewer only at the end of the stream), counting them."""

    def __init__(self, raw: BinaryIO, counter: ReadCounter) -> None:
        self.raw, self.counter = raw, counter

    def read_exact(self, n: int) -> bytes:
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


def iter_members(
    raw: BinaryIO,
    url: str,
    counter: ReadCounter,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    at: int = 0,
) -> Iterator[Member]:
    """Yield every regular file member of a tar stream (:data:`Member`), which starts at byte
    ``at`` of the shard (a part of it read by range: offsets stay the shard's). A member's headers
    begin at its pax or long-name header when it has one.

    A large member's data is read on its own, exactly its size, so the bytes yielded are the bytes
    read (slicing them out of a padded block would copy every image once more); its padding comes
    in the same read as the next header. ``counter`` counts the bytes; the caller times the calls.
    """
    reader = _ExactReader(raw, counter)
    long_name: str | None = None
    header_at = begin = at
    header = reader.read_exact(BLOCK)
    while True:
        if len(header) == 0:
            raise ShardFormatError(
                url, header_at, "shard ends without the tar end-of-archive marker (truncated?)"
            )
        if len(header) < BLOCK:
            raise ShardFormatError(url, header_at, f"truncated tar header ({len(header)} of 512 bytes)")
        if header == _ZERO_BLOCK:
            return  # end-of-archive; the second zero block and padding are not needed
        name, size, kind = _fields(header, url, header_at)
        # checked before a byte is read: a declared size allocates nothing
        limit = META_MAX_BYTES if kind in (b"x", b"L") else max_member_bytes
        if size > limit:
            raise ShardFormatError(
                url, header_at, f"member declares {size} bytes, over the {limit}-byte limit"
            )
        data_at = header_at + BLOCK
        padding = -size % BLOCK
        if size <= SMALL_MEMBER:
            rest = reader.read_exact(size + padding + BLOCK)
            data, rest = rest[:size], rest[size:]
        else:
            data = reader.read_exact(size)
            rest = reader.read_exact(padding + BLOCK) if len(data) == size else b""
        if len(data) < size:
            raise ShardFormatError(
                url, data_at, f"member {name!r} declares {size} bytes but only {len(data)} follow (truncated)"
            )
        if len(rest) < padding:
            raise ShardFormatError(
                url, data_at, f"member {name!r} is whole but the shard ends inside its padding (truncated)"
            )
        header, header_at = rest[padding:], data_at + size + padding
        if kind in (b"x", b"L"):  # pax / GNU long name for the next member
            try:
                long_name = _pax_path(data) if kind == b"x" else data.rstrip(b"\0").decode("utf-8", "replace")
            except ValueError as exc:
                raise ShardFormatError(url, data_at, f"malformed pax extended header: {exc}") from None
            continue
        if kind not in (b"0", b"\0", b"7"):
            long_name = None
            begin = header_at
            continue  # directories, links, devices: never followed, never created
        yield (long_name or name), begin, data_at, data, header_at
        long_name = None
        begin = header_at


def split_key(name: str) -> tuple[str, str]:
    """webdataset's rule: the key is everything before the first dot of the last path part."""
    slash = name.rfind("/")
    dot = name.find(".", slash + 1)
    if dot < 0:
        return name, ""
    return name[:dot], name[dot + 1 :].lower()


def iter_samples(
    raw: BinaryIO,
    url: str,
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES,
    at: int = 0,
    first: int = 0,
) -> Iterator[Sample]:
    """Group consecutive members sharing a key into samples, with the bytes and time each cost.

    A sample is whole once the next sample's first member is read, so each sample is charged the
    reading from the end of the previous one up to then (the shard's last sample: up to its end);
    the clocks run once per sample, and never while the consumer holds it. ``at``: where in the
    shard ``raw`` starts (:func:`iter_members`); ``first``: the index of its first sample.
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

    for name, begin, data_at, data, end in iter_members(raw, url, counter, max_member_bytes, at):
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
