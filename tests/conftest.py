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


def _live_dali_pipelines() -> set[int] | None:
    """The ids of the DALI pipelines alive now (DALI keeps a weak reference to each), or None when
    DALI is not imported; every pipeline alive is assumed new if this DALI keeps no such set."""
    dali = sys.modules.get("nvidia.dali.pipeline")
    if dali is None:
        return None
    refs = getattr(dali.Pipeline, "_pipes", None)
    if refs is None:
        return {-1}
    return {id(p) for p in (ref() for ref in list(refs)) if p is not None}


@pytest.fixture(autouse=True)
def _release_dali_pipelines():
    # a DALI pipeline left to the garbage collector can be collected inside a DataLoader worker a
    # later test forks, where DALI's threads do not exist: the worker hangs or crashes there. So a
    # full collection after a test that leaves a pipeline of its own alive (not after every test
    # once DALI is imported: that cost 0.2-2 s a test; a pipeline that survives the collection is
    # reachable, and later tests need not collect for it)
    before = _live_dali_pipelines() or set()
    yield
    after = _live_dali_pipelines()
    if after and not after <= before:
        gc.collect()


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    # never touch the user's ~/.cache/iobench from a test: session-scoped and autouse, so it is set
    # before any other session fixture (a dataset, a sweep) runs, and every subprocess inherits it
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IOBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "iobench-cache"))
        patch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
        yield
