"""Crash-safe file writes: readers see the old file or the complete new one, never a torn one."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from loaders.storage import fsync_dir


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO[Any]]:
    """Yield a file object; on clean exit its contents replace ``path`` in one rename.

    The temporary lives in the destination directory because ``os.replace`` is only atomic
    within one filesystem. On error the temporary is removed and ``path`` is untouched.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write supports modes 'w' and 'wb', not {mode!r}")
    dest = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # mkstemp creates 0600 files; published files should get the usual umask-derived mode.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(dest.parent)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 2) -> None:
    """Serialise ``obj`` to ``path`` atomically (sorted keys, so equal objects give equal bytes)."""
    with atomic_write(path, "w") as f:
        json.dump(obj, f, indent=indent, sort_keys=True)
        f.write("\n")
