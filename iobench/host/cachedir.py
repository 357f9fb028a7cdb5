"""Where iobench keeps what it makes once and reuses: generated datasets, calibrations, the lab."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$IOBENCH_CACHE``, else ``$XDG_CACHE_HOME/iobench``, else ``~/.cache/iobench``."""
    if os.environ.get("IOBENCH_CACHE"):
        return Path(os.environ["IOBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "iobench"
