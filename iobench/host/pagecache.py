"""Page-cache residency, eviction and warming for dataset files, without root.

A "cold" benchmark is only honest if the shards really are out of the page cache, so we
measure residency with mincore(2) instead of trusting that an eviction call worked.
Linux only: other kernels expose different (or no) residency information.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "FileResidency",
    "PageCacheUnsupported",
    "Residency",
    "drop_all_caches",
    "evict",
    "residency",
    "warm",
]

# mincore's vector holds one byte per page; mapping 1 GiB at a time bounds it to 256 KiB
# (4 KiB pages) however large the file is, and keeps offsets well inside 64-bit off_t.
_WINDOW = 1 << 30
_READ_BUF = 8 << 20

_PROT_READ = 0x1
_MAP_SHARED = 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value


class PageCacheUnsupported(NotImplementedError):
    """Residency cannot be measured on this platform; reports must say the cache state is unknown."""


@dataclass(frozen=True)
class FileResidency:
    path: str
    resident_bytes: int
    total_bytes: int

    @property
    def fraction(self) -> float:
        return self.resident_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True)
class Residency:
    resident_bytes: int
    total_bytes: int
    # An empty set of files has nothing resident and nothing to evict: 0.0, not NaN,
    # so callers can compare it against thresholds without special cases.
    fraction: float
    files: tuple[FileResidency, ...] | None = None

    @classmethod
    def combine(cls, parts: list[FileResidency], per_file: bool) -> Residency:
        resident = sum(p.resident_bytes for p in parts)
        total = sum(p.total_bytes for p in parts)
        return cls(
            resident_bytes=resident,
            total_bytes=total,
            fraction=resident / total if total else 0.0,
            files=tuple(parts) if per_file else None,
        )


PathArg = str | os.PathLike | Iterable[str | os.PathLike]


def _require_linux() -> None:
    if not sys.platform.startswith("linux"):
        raise PageCacheUnsupported(
            f"page-cache residency cannot be measured on {sys.platform!r}: iobench uses Linux "
            "mincore(2) semantics; the run's cache state must be reported as unknown"
        )


_libc_handle: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _libc_handle
    if _libc_handle is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        # Explicit prototypes: the defaults (int return, int args) would truncate 64-bit
        # addresses and offsets.
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int64,
        ]
        libc.munmap.restype = ctypes.c_int
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.restype = ctypes.c_int
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        _libc_handle = libc
    return _libc_handle


def _as_paths(paths: PathArg) -> list[str]:
    if isinstance(paths, str | os.PathLike):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _open_regular(path: str) -> int:
    """Open read-only, turning OS errors into messages that say which file and what to do."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no such file; check the dataset path, or upload the dataset there first"
        ) from None
    except PermissionError:
        raise PermissionError(
            f"{path}: permission denied; the benchmark user needs read access to the dataset"
        ) from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{path}: is a directory; pass the shard files in it") from None
    if not os.path.isfile(path):
        os.close(fd)
        raise IsADirectoryError(
            f"{path}: not a regular file; page-cache residency is defined for regular files only"
        )
    return fd


def _file_residency(path: str, page: int) -> FileResidency:
    fd = _open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return FileResidency(path, 0, 0)
        libc = _libc()
        resident = 0
        for offset in range(0, size, _WINDOW):
            length = min(_WINDOW, size - offset)
            npages = (length + page - 1) // page
            addr = libc.mmap(None, length, _PROT_READ, _MAP_SHARED, fd, offset)
            if addr is None or addr == _MAP_FAILED:
                err = ctypes.get_errno()
                raise OSError(err, f"{path}: mmap for residency failed: {os.strerror(err)}")
            try:
                vec = (ctypes.c_ubyte * npages)()
                if libc.mincore(addr, length, vec) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"{path}: mincore failed: {os.strerror(err)}")
            finally:
                libc.munmap(addr, length)
            # Only the low bit is defined; the others are reserved by the kernel.
            bits = np.frombuffer(memoryview(vec), dtype=np.uint8) & 1
            count = int(bits.sum())
            # The last page of the file is partly beyond EOF: count only real bytes.
            if offset + length == size and bits[-1]:
                count -= 1
                resident += count * page + (length - (npages - 1) * page)
            else:
                resident += count * page
        return FileResidency(path, resident, size)
    finally:
        os.close(fd)


def residency(paths: PathArg, *, per_file: bool = False) -> Residency:
    """Bytes of `paths` that are in the page cache now, measured with mincore(2)."""
    _require_linux()
    page = os.sysconf("SC_PAGE_SIZE")
    return Residency.combine([_file_residency(p, page) for p in _as_paths(paths)], per_file)


def evict(paths: PathArg, *, per_file: bool = False) -> Residency:
    """Drop the files' pages from the page cache (no root needed); returns residency after.

    posix_fadvise(DONTNEED) cannot drop dirty pages or pages another process has mapped,
    so the result is measured rather than assumed.
    """
    _require_linux()
    names = _as_paths(paths)
    for path in names:
        fd = _open_regular(path)
        try:
            # Dirty pages survive DONTNEED. fdatasync on an O_RDONLY fd works on Linux and
            # is nearly free for a clean file, so always doing it is simpler than asking.
            # A filesystem without sync support raises; fadvise still drops the clean pages.
            with contextlib.suppress(OSError):
                os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return residency(names, per_file=per_file)


def warm(paths: PathArg, *, per_file: bool = False) -> Residency:
    """Read the files sequentially so they become resident; returns residency after.

    A dataset larger than free RAM cannot become fully resident; the returned fraction shows it.
    """
    _require_linux()
    names = _as_paths(paths)
    buf = bytearray(_READ_BUF)
    view = memoryview(buf)
    for path in names:
        fd = _open_regular(path)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            with os.fdopen(fd, "rb", buffering=0, closefd=False) as f:
                while f.readinto(view):
                    pass
        finally:
            os.close(fd)
    return residency(names, per_file=per_file)


def drop_all_caches(proc_root: str = "/proc") -> bool:
    """Drop the whole clean page cache via drop_caches; True only if it worked.

    Needs root and affects every process on the host, so it is never the default path.
    """
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    os.sync()  # drop_caches only drops clean pages
    try:
        with open(os.path.join(proc_root, "sys/vm/drop_caches"), "w") as f:
            f.write("1\n")
    except OSError:
        return False  # e.g. root inside a container with a read-only /proc/sys
    return True
