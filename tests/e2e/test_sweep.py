"""End to end: `iobench sweep` on the local tier, through the CLI, in fresh cell processes."""

from __future__ import annotations

import json
import sys

import pyarrow.parquet as pq
import pytest
import yaml

from iobench.results.schema import RESULT_SCHEMA, SCHEMA_VERSION
from tests.helpers.runs import SLEEPING_H100, exact_epochs


def _config(tmp_path, dataset, **run):
    cfg = {
        "dataset": {"path": str(dataset)},
        "tiers": [{"kind": "local", "name": "disk"}],
        "loaders": [{"kind": "torch", "workers": [0, 2], "batch_size": [16], "shuffle_buffer": 64}],
        "accelerators": [SLEEPING_H100],
        "run": {"warmup_steps": 2, "min_measure": exact_epochs(), **run},  # run may set its own
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_sweep_writes_results_and_finds_decode_bound(iobench_sweep, tmp_path, tiny_dataset):
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", _config(tmp_path, tiny_dataset), "--out", out)
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out / "results.parquet")
    assert table.schema.equals(RESULT_SCHEMA)
    rows = table.to_pylist()
    assert [r["workers"] for r in rows] == [0, 2]
    for row in rows:
        cell = out / row["cell_id"]
        summary = json.loads((cell / "summary.json").read_text())
        manifest = json.loads((cell / "manifest.json").read_text())
        steps = pq.read_table(cell / "steps.parquet").to_pylist()
        assert summary["schema_version"] == SCHEMA_VERSION and summary["status"] == "ok"
        assert manifest["tier"]["kind"] == "local" and manifest["versions"]["torch"]
        assert row["client"] is None and summary["client"] is None  # a file system: no object client
        assert manifest["cache_state"]["requested"] == "cold"
        assert manifest["cache_state"]["achieved"] in ("cold", "partly-cold")
        # one epoch of 256 samples in batches of 16; warm-up steps are marked, not dropped
        assert sum(s["samples"] for s in steps) == 256
        assert sum(s["warmup"] for s in steps) == 2
        # an emulated H100 wants 7,000 images/s; two cores decode far fewer: prep-bound on decode, or,
        # where the readers filled the cores (two workers on two cores), the cores are spent
        spent = row["budget_usable"] and (
            row["budget_trainer"] + row["budget_readers"] + row["budget_own"] + row["budget_others"]
            >= 0.9 * row["budget_usable"]
        )
        assert row["verdict"] == ("cores" if spent else "prep"), row["headline"]
        assert row["verdict"] == "cores" or row["binding_stage"] == "decode"
        assert row["cores_per_accelerator"] > 1.0  # 7,000/s of decode
        assert row["au"] < 0.5 and row["stall_fraction"] > 0.5
        assert row["decode_ms_per_sample"] > row["fetch_ms_per_sample"]
        # bytes actually read: the measured steps' share of the shards, never more than the dataset
        assert 0 < row["bytes_per_s"] * row["wall_s"] <= manifest["dataset"]["total_bytes"]
        assert row["errors"] == 0
    assert "prep-bound (CPU JPEG decode)" in proc.stdout
    assert "per sample, 2 reader(s) spend" in proc.stdout

    # the report command reads the run back
    report = iobench_sweep.run("report", out)
    assert report.returncode == 0 and "prep-bound" in report.stdout


@pytest.mark.skipif(sys.version_info < (3, 11), reason="PYTHONSAFEPATH is Python 3.11's")
def test_cells_import_iobench_not_a_namesake_in_the_working_directory(iobench_sweep, tmp_path, tiny_dataset):
    """A user's project with its own loaders/ and iobench/ packages, where they run iobench from (the
    console script, as installed): the cell processes must import iobench's, not the project's."""
    project = tmp_path / "project"
    for name in ("loaders", "iobench"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text(f"raise ImportError('the project\\'s own {name}')\n")
    cfg = yaml.safe_load(_config(tmp_path, tiny_dataset).read_text())
    cfg["loaders"][0]["workers"] = [0]
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", path, "--out", out, script=True, cwd=project)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    assert row["status"] == "ok", row["error"]


def test_sweep_reports_a_failed_cell_without_losing_the_others(iobench_sweep, tmp_path, tiny_dataset):
    cfg = yaml.safe_load(_config(tmp_path, tiny_dataset).read_text())
    cfg["tiers"].append({"kind": "local", "name": "gone", "path": str(tmp_path / "missing")})
    cfg["loaders"][0].update(workers=[1], kind="nodes")  # the torchdata.nodes backend, by name
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", path, "--out", out)
    assert proc.returncode == 1
    rows = {r["tier"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert rows["disk"]["status"] == "ok"
    assert rows["gone"]["status"] == "failed"
    assert "missing" in rows["gone"]["error"] and "does not exist" in rows["gone"]["error"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda c: c["loaders"][0].update(workers=[-1]),
            "loaders[0].workers[0]=-1: expected an integer >= 0",
        ),
        (
            lambda c: c["accelerators"][0].update(type="tpu9"),
            "accelerators[0].type='tpu9': allowed values are a100",
        ),
        (
            lambda c: c["run"].update(cache="lukewarm"),
            "run.cache[0]='lukewarm': allowed values are cold, warm, as-is",
        ),
        (lambda c: c["run"].update(warmup=3), "run.warmup: unknown key; allowed keys here are"),
        (
            lambda c: c.update(tiers=[{"kind": "local", "pth": "/x"}]),
            "tiers[0].pth: not an option of tier kind local; its options are drop_caches, name, path; did you mean path?",
        ),
        (lambda c: c.update(tiers=[{"kind": "nvmeof"}]), "nvmeof"),
    ],
)
def test_bad_config_names_key_value_and_allowed(iobench, tmp_path, tiny_dataset, mutate, message):
    cfg = yaml.safe_load(_config(tmp_path, tiny_dataset).read_text())
    mutate(cfg)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = iobench("sweep", path, "--out", tmp_path / "run")
    assert proc.returncode == 2
    assert message in " ".join(proc.stderr.split()), proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_short_window_runs_more_epochs_and_a_capped_one_says_so(
    iobench_sweep, tmp_path, tiny_dataset, monkeypatch
):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path / "cache"))  # where the host's decode rate is kept
    path = _config(tmp_path, tiny_dataset, min_measure={"seconds": 1.0, "steps": 40}, cache=["cold", "warm"])
    cfg = yaml.safe_load(path.read_text())
    cfg["loaders"][0]["workers"] = [0]
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", path, "--out", out)
    assert proc.returncode == 0, proc.stderr
    rows = {r["cache_requested"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    total = json.loads((out / rows["cold"]["cell_id"] / "manifest.json").read_text())["dataset"][
        "total_bytes"
    ]
    for row in rows.values():
        # 16 steps an epoch (256 samples, batch 16): 40 measured steps need at least 3 epochs
        assert row["window_met"] and row["window_steps"] >= 40 and row["window_s"] >= 1.0
        assert row["window_epochs"] >= 3 and row["window_added_epochs"] == row["window_epochs"] - 1
        assert row["epochs"] == row["window_epochs"] and 0 < row["samples_per_s_rel_ci"] < 1
        assert "measured only" not in row["headline"]
    detail = iobench_sweep.run("report", out, "--detail")  # the window in words is a detail
    assert detail.returncode == 0, detail.stderr
    assert "window: " in detail.stdout and "added to reach run.min_measure" in detail.stdout
    # the cell's own processes: the cold cell read its dataset off the disk, the warm one next to none
    assert rows["cold"]["cache_achieved"] in ("cold", "partly-cold")
    assert rows["cold"]["cell_device_read_bytes"] >= 0.5 * total
    # (a warm cell's processes may still page in a few MB of libraries on a busy host: 4 MB seen)
    assert rows["warm"]["cell_device_read_bytes"] <= 0.25 * total
    assert rows["warm"]["read_call_bytes_per_s"] > 0
    # what the cells measured of decode + augment is now this host's rate for recommend and the estimate
    from iobench.analysis import decoderate

    kept = decoderate.resolve()
    assert kept.kind == "calibration" and str(out) in kept.source and kept.per_core() > 0

    capped = _config(
        tmp_path, tiny_dataset, max_steps=6, cache=["warm"], min_measure={"seconds": 1.0, "steps": 40}
    )
    out = tmp_path / "capped"
    proc = iobench_sweep.run("sweep", capped, "--out", out, "--json")  # the results as one document on stdout
    assert proc.returncode == 0, proc.stderr
    for row in pq.read_table(out / "results.parquet").to_pylist():
        assert row["window_met"] is False and row["window_steps"] == 4 and row["window_added_epochs"] == 0
        assert "measured only 4 steps" in row["headline"] and "run.max_steps" in row["headline"]
    doc = json.loads(proc.stdout)
    assert doc["run_dir"] == str(out) and [c["window"]["met"] for c in doc["cells"]] == [False, False]
    assert "SHORT" in proc.stderr  # the report went to stderr


def test_a_trainer_timed_alone_while_hogs_hold_the_cores_is_not_judged_short(
    iobench_sweep, tmp_path, tiny_dataset
):
    # an emulated H100 at batch 16 does its model's host work per step: alone on a quiet host it is
    # short of its 7,000/s ("host-bound before any data"); with CPU hogs holding the cores the timing
    # met a busy host, and the report says so instead of judging the trainer
    import subprocess

    cfg = yaml.safe_load(_config(tmp_path, tiny_dataset).read_text())
    cfg["loaders"][0]["workers"] = [1]
    cfg["accelerators"] = [{**SLEEPING_H100, "host_work": "resnet50"}]
    path = tmp_path / "hogged.yaml"
    path.write_text(yaml.safe_dump(cfg))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        proc = iobench_sweep.run("sweep", path, "--out", tmp_path / "run")
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert proc.returncode == 0, proc.stderr
    (row,) = pq.read_table(tmp_path / "run" / "results.parquet").to_pylist()
    assert row["trainer_alone_quiet"] is False and row["trainer_alone_others_cores"] > 0.5
    assert "host-bound before any data" not in row["headline"]
    assert "the host was busy" in proc.stdout or "the next limit is not judged" in proc.stdout
