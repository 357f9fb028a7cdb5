"""A real sweep in a test (started by the ``iobench_sweep`` fixture) and its cells caught: in their
step loop, failed, resumed; and the samples a cell's ranks read, checked against its dataset."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from tests.helpers.processes import Sweeps
from tests.helpers.runs import exact_epochs

STALL = 40  # run.stall_timeout in these sweeps unless given: a backstop well above the tiers' deadlines


def env_of(lab) -> dict[str, str]:
    return {**os.environ, **lab.env}


def sweep_file(
    tmp_path: Path,
    dataset: Path,
    tier: dict,
    *,
    stall: int = STALL,
    workers=(1,),
    samples_per_s: int = 80,
    **run,
) -> Path:
    """One tier, the torch loader, the emulated accelerator at ``samples_per_s`` (a rank), one epoch
    exactly; ``run`` adds or overrides run settings (epochs, ranks_per_node, record_keys, ...)."""
    cfg = {
        "dataset": {"path": str(dataset)},
        "tiers": [tier],
        "loaders": [{"kind": "torch", "workers": list(workers), "batch_size": [16], "shuffle_buffer": 16}],
        "accelerators": [{"kind": "emulated", "type": "custom", "samples_per_s": samples_per_s}],
        # one epoch exactly (16 steps, 3.2 s at 80 samples/s): the default window (50 steps after
        # warm-up) ran each cell that finishes, a resumed one included, for four epochs
        "run": {"warmup_steps": 1, "epochs": 1, "stall_timeout": stall, "min_measure": exact_epochs(), **run},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def s3_tier(what: str, deadline_s: float) -> dict:
    """A streamed S3 tier over a fresh bucket of the lab, the sweep's dataset uploaded to it."""
    tag = uuid.uuid4().hex[:8]
    return {
        "kind": "s3",
        "name": f"s3-{tag}",
        "url": f"s3://{what}-{tag}/tiny",
        "upload": True,
        "deadline_s": deadline_s,
    }


def running(out: Path) -> str | None:
    try:
        running = json.loads((out / "sweep-state.json").read_text())["running"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return running["cell_id"] if running else None


def stepping(out: Path, proc: subprocess.Popen, *, cell_id: str | None = None, steps: int = 3) -> str:
    """The running cell's id once its live figures show ``steps`` batches (it is reading the tier)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the sweep ended before its cell ran:\n{proc.stdout.read()}")
        now = running(out)
        if now and (cell_id is None or now == cell_id):
            try:
                live = json.loads((out / f".attempt-{now}" / "live.json").read_text())
            except (OSError, ValueError):
                live = {}
            if (live.get("steps") or 0) >= steps:
                return now
        time.sleep(0.05)
    raise AssertionError("the cell never reached its step loop")


def failed(out: Path, cell_id: str, proc: subprocess.Popen, timeout: float = 120) -> tuple[dict, float]:
    """The cell's summary once one that is not ok is on disk, and when it was seen (monotonic)."""
    path = out / cell_id / "summary.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            summary = None
        if summary and summary["status"] != "ok":
            return summary, time.monotonic()
        if summary and summary["status"] == "ok":
            raise AssertionError(f"{cell_id} finished ok despite the fault")
        if proc.poll() is not None and not path.exists():
            raise AssertionError(f"the sweep ended without a result for {cell_id}:\n{proc.stdout.read()}")
        time.sleep(0.05)
    raise AssertionError(f"no failure of {cell_id} within {timeout} s")


def assert_table(out: Path, expect: dict[str, str]) -> None:
    rows = {r["cell_id"]: r["status"] for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert rows == expect, rows


def assert_resumes(sweeps: Sweeps, out: Path, env: dict, cell_ids: list[str]) -> float:
    """``iobench sweep --resume`` finishes the run: every cell ok; how long it took."""
    t0 = time.monotonic()
    resumed = sweeps.resume(out, env)
    assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr[-4000:]
    assert_table(out, dict.fromkeys(cell_ids, "ok"))
    return time.monotonic() - t0


def dataset_keys(dataset: Path) -> list[str]:
    """The sample keys of a local dataset's shards, read from their tar headers."""
    keys = []
    for shard in sorted(dataset.glob("*.tar")):
        with tarfile.open(shard) as tf:
            keys += [m.name.rsplit(".", 1)[0] for m in tf.getmembers() if m.name.endswith(".jpg")]
    return keys


def assert_each_sample_once(cell_dir: Path, dataset: Path, world_size: int, epochs: int) -> None:
    """Every epoch of the cell (run.record_keys) read each sample of the dataset exactly once across
    its ranks, and every rank read some."""
    everything = dataset_keys(dataset)
    assert len(set(everything)) == len(everything) == 256
    keys = pq.read_table(cell_dir / "keys.parquet").to_pylist()
    assert {k["epoch"] for k in keys} == set(range(epochs))
    for epoch in range(epochs):
        by_rank = [
            [k["key"] for k in keys if k["epoch"] == epoch and k["rank"] == r] for r in range(world_size)
        ]
        assert all(by_rank), f"epoch {epoch}: a rank read nothing"
        read = [key for rank_keys in by_rank for key in rank_keys]
        assert len(read) == len(set(read)), f"epoch {epoch}: a sample was read twice"
        assert sorted(read) == sorted(everything), f"epoch {epoch}: the ranks did not read the whole dataset"
