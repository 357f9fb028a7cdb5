"""The processes a test may start that cost more than the test itself, as fixtures: the cost hook
(tests/helpers/cost.py) sees a fixture in ``item.fixturenames`` and marks the test by it, which it
cannot do for a helper function. tests/architecture/test_costs.py keeps them the only way in.

- ``iobench``: any command of the CLI in a fresh process, provided it runs no cell (a config error,
  a dry run, a report): cheap, so it carries no mark, and a cell run through it fails the test;
- ``iobench_sweep``: a sweep whose cells run (each a fresh torch process, torchrun for ranks): slow;
- ``torchrun``: a script under torchrun (``python -m torch.distributed.run``): slow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "iobench.cli"]
# torchrun's command line, for a test that has another process start it (``iobench probe -- ...``)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def _run(argv: Sequence[object], *, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)


def cell_results_of(args: Sequence[object], cwd: str | os.PathLike[str] | None) -> set[Path]:
    """The cell summaries in the run directory a command names (or the sweep's default one)."""
    args = [str(a) for a in args]
    if "--out" in args[:-1]:
        where = Path(args[args.index("--out") + 1])
        if not where.is_absolute():
            where = Path(cwd or ".") / where
        return set(where.glob("*/summary.json"))
    return set((Path(cwd or ".") / "iobench-runs").glob("*/*/summary.json"))


class Sweeps:
    """Runs ``iobench sweep`` with its cells: ``run`` to the end, ``start`` in the background (to
    inject a fault while a cell runs), ``resume`` a run directory; also any other command beside."""

    def run(
        self,
        *args: object,
        timeout: float = 600,
        wrap: Callable[[list[str]], list[str]] | None = None,
        script: bool = False,
        **kwargs,
    ) -> subprocess.CompletedProcess:
        """``wrap`` turns the command line into the one to run (inside a cgroup, a namespace);
        ``script``: the installed console script ``iobench`` rather than ``python -m iobench.cli``."""
        argv = [*([str(Path(sys.executable).with_name("iobench"))] if script else CLI), *map(str, args)]
        return _run(wrap(argv) if wrap else argv, timeout=timeout, **kwargs)

    def start(self, *args: object, env: dict[str, str] | None = None) -> subprocess.Popen:
        """``iobench sweep ARGS...`` in the background, its output in one pipe."""
        return subprocess.Popen(
            [*CLI, "sweep", *map(str, args)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def resume(self, out: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return self.run("sweep", "--resume", "--out", out, env=env, timeout=300)


@pytest.fixture(scope="session")  # stateless: module-scoped runs may use it too
def iobench():
    """``iobench(*args, timeout=120, cwd=None, env=None)``: a CLI command that runs no cell."""

    def run(*args: object, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        before = cell_results_of(args, kwargs.get("cwd"))
        proc = _run([*CLI, *args], timeout=timeout, **kwargs)
        if cell_results_of(args, kwargs.get("cwd")) - before:
            pytest.fail(
                f"`iobench {' '.join(map(str, args))}` ran cells: take the iobench_sweep fixture, "
                "which marks the test slow",
                pytrace=False,
            )
        return proc

    return run


@pytest.fixture(scope="session")  # stateless: module-scoped runs may use it too
def iobench_sweep() -> Sweeps:
    """A sweep whose cells run: the test is marked slow."""
    return Sweeps()


@pytest.fixture(scope="session")  # stateless: module-scoped runs may use it too
def torchrun():
    """``torchrun(*args, timeout=300, cwd=None, env=None)``: ``python -m torch.distributed.run ARGS``."""

    def run(*args: object, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
        return _run([*TORCHRUN, *args], timeout=timeout, **kwargs)

    return run


def ddp_example(
    torchrun: Callable[..., subprocess.CompletedProcess],
    shards: str,
    record: Path,
    *flags: object,
    cwd: Path,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """examples/ddp_train.py under ``torchrun`` (the fixture): two ranks on gloo, one DataLoader
    worker each, 32-pixel images of 10 classes, each rank's steps written to ``record``. The
    timeout is a "no hang" check: a rank left waiting in an all-reduce never exits."""
    from tests.helpers.paths import ROOT

    env = {**os.environ, **(env or {}), "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return torchrun(
        "--standalone",
        "--nproc-per-node=2",
        "--max-restarts=0",
        ROOT / "examples" / "ddp_train.py",
        f"--shards={shards}",
        "--workers=1",
        "--image-size=32",
        "--classes=10",
        f"--record={record}",
        *flags,
        timeout=300,
        env=env,
        cwd=cwd,
    )
