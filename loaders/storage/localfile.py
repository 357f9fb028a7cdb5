"""Local shard files, mapped into memory: each read copies its bytes once, from the page cache into
the bytes object returned, as fio's buffered read copies into its buffer.

A buffered file copies twice (page cache -> its buffer -> the member's bytes); reading unbuffered
copies once but turns every small read of a cold file into a synchronous trip to the disk. The
mapping's ``read``/``seek``/``tell`` are mmap's own C methods, so the tar reader's exact member
reads cost the copy alone (benchmarks/bench_local_read.py). POSIX_FADV_SEQUENTIAL, given to the
file before it is mapped, doubles the file's read-ahead window, which page faults on the mapping
use as read() does. fio gives the same advice by default: without it, fio read a cold shard set at
0.64 × the rate it reaches with it; with it, the mapped tar reader went from 0.67 × to 0.76 × fio
in one scratch run, and from 0.80–0.96 × to 1.03–1.15 × in the benchmark (docs/benchmarks.md).
MADV_SEQUENTIAL marks the mapping as read in order. What cannot be mapped (an empty file, a pipe,
a device) opens buffered.

Reading a mapped page past the end of a file that shrank under the mapping raises SIGBUS, which
kills the reader and names nothing (torch then blames shared memory); DALI's webdataset reader maps
shards the same way. So every read first asks the file's size (one fstat, ~1 µs a sample): a shard
cut short or rewritten in place while it is read is a ShardFormatError naming it, its size then and
now, and the offset, in a DataLoader worker or in the main process alike. Only a shrink within the
microseconds between that check and the copy still ends in SIGBUS. A disk's read error on a mapped
page does too (EIO through read() becomes SIGBUS here: the worker dies by a signal that names no
shard); a file system whose reads can stop (the CephFS tier, which always sets a deadline) is read
through deadline.DeadlineFile instead, never mapped. A shard truncated before it is opened is mapped
at its real size and gives ShardFormatError like any short tar.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from typing import BinaryIO

from loaders.formats.tar import ShardFormatError

# what cannot be mapped: ~110 KB member reads served from 4 MiB reads, not the default 8 KiB
BUFFER = 4 * 2**20


class MappedFile(mmap.mmap):
    """A read-only mapping of a whole file that passes for a binary file object."""

    path = ""

    def read(self, n: int | None = -1) -> bytes:
        now = self.size()  # the file's size now (fstat), against the mapping's
        if now < len(self):
            raise ShardFormatError(
                self.path,
                self.tell(),
                f"the shard shrank from {len(self):,} to {now:,} bytes while it was read (rewritten or "
                "truncated in place under the job? write shards once and rename them into place)",
            )
        return super().read(n)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True


def open_local(path: str) -> BinaryIO:
    """``path`` mapped for reading, or opened buffered where it cannot be mapped."""
    f = open(path, "rb", buffering=BUFFER)  # noqa: SIM115 - returned, or closed once mapped
    with contextlib.suppress(OSError):  # a pipe has no read-ahead to ask for
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
    try:
        mapped = MappedFile(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError):  # 0 bytes cannot be mapped, nor can a pipe or a device
        return f
    f.close()  # the mapping holds its own descriptor (and the file's read-ahead state)
    mapped.path = path
    mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped  # type: ignore[return-value]  # a file-like object: typing.BinaryIO is a class, not a protocol it could meet
