"""A benchmark runs end to end in its smallest mode against today's packages, its section written
where ``BENCHMARKS_DOC`` points (never into docs/benchmarks.md, which holds measurements only).

tests/architecture/test_scripts_current.py checks every script's names and attributes without
running it; this runs one that needs no lab and takes seconds (the worker's path through the
pipeline nodes and the batch ring), so what a static read cannot see (a signature, a behaviour)
breaks here too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

pytestmark = pytest.mark.slow  # a benchmark process with torch and a small dataset: a few seconds


def test_bench_worker_path_runs_in_its_smallest_mode(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    done = subprocess.run(
        [sys.executable, "bench_worker_path.py", "--samples", "64", "--rounds", "2"],
        cwd=ROOT / "benchmarks",
        env={**os.environ, "BENCHMARKS_DOC": str(doc)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "worker / bare" in done.stdout
    section = doc.read_text()
    assert "<!-- begin worker-path -->" in section and "| worker path |" in section
