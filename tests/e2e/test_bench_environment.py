"""The peers' environment of benchmarks/ as the README documents it installs and imports in a fresh
virtualenv: torch as the README installs it, iobench's dependencies with the `[peers]` extra, and
litdata `--no-deps` beside them (its own metadata requires torchvision). Then every module
`benchmarks/bench_loaders.py` checks for its peers before it starts imports there: litdata's
imports (requests, tifffile ...) must come from the extra, not from whatever else a developer's
environment happens to hold.

Needs the package index: under CI an index that does not answer fails the test, elsewhere it is
skipped with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

pytestmark = pytest.mark.slow  # a fresh virtualenv with torch and iobench's dependencies: a minute or two

INSTALL_TIMEOUT_S = 600
tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the index of the CI's Python has it


def _requirements(*extras: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]


def _run(python: Path, *args: str, timeout: float = INSTALL_TIMEOUT_S) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory) -> Path:
    """A new virtualenv with the README's torch, iobench's dependencies and `[peers]`, and litdata
    installed --no-deps; iobench itself is this checkout, put on the path by the benchmark."""
    where = tmp_path_factory.mktemp("peers-venv")
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    steps = [
        ["-m", "pip", "install", "--quiet", f"torch=={version('torch').split('+')[0]}"],
        ["-m", "pip", "install", "--quiet", *_requirements("peers")],
        ["-m", "pip", "install", "--quiet", "--no-deps", "litdata>=0.2"],
    ]
    for step in steps:
        try:
            done = _run(python, *step)
        except subprocess.TimeoutExpired:
            done = None
        if done is None or done.returncode:
            message = f"pip {' '.join(step[2:])}: " + (
                done.stderr[-2000:] if done else f"no end within {INSTALL_TIMEOUT_S} s"
            )
            index_down = done is not None and "No matching distribution" in done.stderr
            if index_down and not os.environ.get("CI"):
                pytest.skip(f"the package index does not answer: {message}")
            pytest.fail(message, pytrace=False)
    return python


def test_the_peers_the_loader_benchmark_checks_for_import_in_the_documented_environment(fresh_python):
    check = (
        "import sys; sys.path[:0] = [sys.argv[1] + '/benchmarks', sys.argv[1]]; import bench_loaders; "
        "missing = bench_loaders.missing_extras(('peers',)); print('\\n'.join(missing)); sys.exit(bool(missing))"
    )
    done = _run(fresh_python, "-c", check, str(ROOT), timeout=300)
    assert done.returncode == 0, (
        f"in a fresh venv with iobench[peers] and litdata:\n{done.stdout}{done.stderr[-2000:]}"
    )


def test_litdata_reads_and_writes_there(fresh_python, tmp_path):
    """What the litdata peer calls, beyond its import: optimize() into its format (in worker
    processes that import the script) and a StreamingDataset over it."""
    script = tmp_path / "lit.py"
    script.write_text(
        "import sys\n"
        "import litdata as ld\n"
        "def rows(i):\n"
        "    yield {'jpg': bytes([i]) * 100, 'cls': i}\n"
        "if __name__ == '__main__':\n"
        "    ld.optimize(fn=rows, inputs=list(range(4)), output_dir=sys.argv[1], chunk_bytes='1MB', num_workers=1)\n"
        "    assert sorted(s['cls'] for s in ld.StreamingDataset(input_dir=sys.argv[1])) == [0, 1, 2, 3]\n"
    )
    done = _run(fresh_python, str(script), str(tmp_path / "lit"), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_benchmark_says_what_to_install_before_it_starts():
    """Here, with a contender's package made unimportable, bench_loaders stops at once and names
    the package and its install line."""
    blocker = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('webdataset', 'litdata'):\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Block())\n"
        "sys.argv = ['bench_loaders.py', '--check']\n"
        f"sys.path[:0] = [{str(ROOT / 'benchmarks')!r}]\n"
        f"import runpy; runpy.run_path({str(ROOT / 'benchmarks' / 'bench_loaders.py')!r}, run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "install first" in done.stderr and "webdataset" in done.stderr
    assert "pip install --no-deps 'litdata>=0.2'" in done.stderr
