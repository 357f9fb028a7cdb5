"""A third-party loader installed with pip, found through the ``iobench.loaders`` entry point, run in
a sweep with one of its own declared options set in the sweep file; a wrong option is refused
before anything runs, with the same kind of message as a wrong tier option."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.helpers.paths import DATA
from tests.helpers.runs import exact_epochs


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    # built from a copy: a build writes build/ and *.egg-info beside the sources
    source = tmp_path_factory.mktemp("plugin-source") / "tinyloader"
    shutil.copytree(DATA / "tinyloader", source)
    site = tmp_path_factory.mktemp("plugin-site")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(site.glob("iobench_tinyloader-*.dist-info/entry_points.txt"))
    return site


def _sweep(
    run: Callable[..., subprocess.CompletedProcess],
    tmp_path: Path,
    site: Path,
    dataset: Path,
    loader: dict,
    *args: str,
) -> subprocess.CompletedProcess:
    """``run`` is the ``iobench_sweep`` fixture's ``run`` for a sweep, ``iobench`` for a dry run."""
    config = {
        "dataset": {"path": str(dataset)},
        "tiers": [{"kind": "local", "name": "disk"}],
        "loaders": [{"kind": "tiny", "workers": [0], "batch_size": [32], "shuffle_buffer": 16, **loader}],
        "accelerators": [{"kind": "emulated", "type": "custom", "samples_per_s": 100_000}],
        "run": {"warmup_steps": 0, "min_measure": exact_epochs()},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return run("sweep", path, "--out", tmp_path / "run", *args, timeout=600, env=env)


def test_a_pip_installed_loader_runs_in_a_sweep_with_its_own_option(
    iobench_sweep, tmp_path, plugin_site, tiny_dataset
):
    proc = _sweep(iobench_sweep.run, tmp_path, plugin_site, tiny_dataset, {"repeat": 2})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = pq.read_table(tmp_path / "run" / "results.parquet").to_pylist()
    assert row["status"] == "ok" and row["loader"] == "tiny"
    assert row["cell_id"] == "disk-tiny-repeat=2-w0-b32-custom100000x1-cold".replace("=", "_")
    # 256 samples, every batch delivered twice by the plugin's own option
    assert row["samples"] == 2 * 256 and row["steps"] == 2 * 8


def test_the_plugins_options_are_checked_like_any_other_key(iobench, tmp_path, plugin_site, tiny_dataset):
    proc = _sweep(iobench, tmp_path, plugin_site, tiny_dataset, {"repeat": "twice"}, "--dry-run")
    assert proc.returncode == 2
    assert (
        "loaders[0]: loader 'tiny': option 'repeat' has value 'twice' of type str; expected int"
        in proc.stderr
    )
    proc = _sweep(iobench, tmp_path, plugin_site, tiny_dataset, {"repat": 2}, "--dry-run")
    assert proc.returncode == 2
    assert (
        "loaders[0].repat: unknown key; allowed keys here are augment_cpu_ms, batch_size, decode, decode_cpu_ms, decode_roi, kind, layout"
        in proc.stderr
    )
    assert "repeat" in proc.stderr  # the plugin's own option is named among the allowed ones
