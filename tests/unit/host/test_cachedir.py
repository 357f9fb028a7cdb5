"""The tests' cache directory: never the user's ~/.cache/iobench."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from iobench.host.cachedir import cache_dir


def test_the_tests_cache_is_the_sessions_own_not_the_users(tmp_path_factory):
    users = Path.home() / ".cache" / "iobench"
    assert cache_dir() != users
    assert cache_dir().is_relative_to(tmp_path_factory.getbasetemp())
    # a process a test starts (a sweep's cell, torchrun's ranks) inherits it
    child = subprocess.run(
        [sys.executable, "-c", "from iobench.host.cachedir import cache_dir; print(cache_dir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(child.stdout.strip()) == cache_dir()
