"""DALI ``fn.readers.webdataset`` index files (format v1.2), written without DALI or GNU tar.

Layout, matching what DALI's own ``wds2idx`` writes byte for byte::

    v1.2 <num_samples>
    <ext> <data_offset> <size> <member_name> [<ext> <data_offset> <size> <member_name> ...]

one line per sample, a sample being consecutive regular members that share a basename. The
basename/extension split is at the first ``.`` after the last ``/`` (webdataset's rule, so
``a.b.jpg`` has extension ``b.jpg``).
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import IO


def wds_index_lines(fileobj_or_path: str | os.PathLike[str] | IO[bytes]) -> list[str]:
    """Index lines (without newlines) for a WebDataset tar given as a path or a binary stream.

    A stream is read in tarfile's streaming mode, which needs no seeking, so an object-store
    response body works too.
    """
    if isinstance(fileobj_or_path, (str, os.PathLike)):
        where = os.fspath(fileobj_or_path)
        opened = tarfile.open(fileobj_or_path, "r:")  # noqa: SIM115 - closed below
    else:
        where = repr(fileobj_or_path)
        opened = tarfile.open(fileobj=fileobj_or_path, mode="r|")  # noqa: SIM115 - closed below
    samples: list[list[str]] = []
    last_base: str | None = None
    with opened as tf:
        for member in tf:
            if not member.isreg():
                continue
            slash = member.name.rfind("/")
            dot = member.name.find(".", slash + 1)
            if dot < 0:
                continue
            base, ext = member.name[:dot], member.name[dot + 1 :]
            if not base or base.endswith("/"):
                continue
            if any(c.isspace() for c in member.name):
                raise ValueError(
                    f"{where}: member name {member.name!r} contains whitespace, "
                    "which the DALI index format cannot represent"
                )
            component = f"{ext} {member.offset_data} {member.size} {member.name}"
            if base != last_base:
                samples.append([component])
                last_base = base
            else:
                samples[-1].append(component)
    if not samples:
        raise ValueError(f"{where}: no samples in WebDataset tar")
    return [f"v1.2 {len(samples)}"] + [" ".join(s) for s in samples]


def default_index_path(tar_path: str | os.PathLike[str]) -> Path:
    """``train-000000.tar`` -> ``train-000000.idx`` in the same directory."""
    return Path(tar_path).with_suffix(".idx")


def write_wds_index(tar_path: str | os.PathLike[str], idx_path: str | os.PathLike[str] | None = None) -> Path:
    """Write the index beside the tar (or at ``idx_path``) atomically; return its path."""
    from iobench.host.atomic import atomic_write

    out = Path(idx_path) if idx_path is not None else default_index_path(tar_path)
    text = "\n".join(wds_index_lines(tar_path)) + "\n"
    with atomic_write(out, "wb") as f:
        f.write(text.encode("ascii"))
    return out
