from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

# registered here once for the whole session: the labs (one each per session), the processes a test
# may start, and the hook that marks a test's cost by the fixtures it uses (tests/helpers/cost.py)
pytest_plugins = ["pytester", "tests.helpers.cost", "tests.helpers.lab_fixture", "tests.helpers.processes"]


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    """A real synthetic dataset, small enough for tests: 256 ImageNet-like JPEGs in 8 shards."""
    from iobench.datasets.synth import synthesize

    out = tmp_path_factory.mktemp("tiny-dataset")
    synthesize(out, samples=256, seed=3, shard_bytes=3_600_000)
    return out


@pytest.fixture(autouse=True)
def _release_dali_pipelines():
    # a DALI pipeline left to the garbage collector can be collected inside a DataLoader worker a
    # later test forks, where DALI's threads do not exist: the worker hangs or crashes there
    yield
    if "nvidia.dali" in sys.modules:
        gc.collect()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # never touch the user's ~/.cache/iobench from a test
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "iobench-cache"))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
