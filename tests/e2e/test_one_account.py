"""One account of every step: a cell's figures agree with each other wherever they are shown.

A matrix of real cells (workers 0 and 2; an emulated H100 with its trainer's host work and without
it, with a compute distribution; a real small CNN; a synchronous two-rank cell), each read back from
every place that shows its AU: summary.json, results.parquet, the epochs weighted by their window
seconds, steps.parquet's ledger, the MLPerf view, the HTML report, `report --json` and recommend's
validation. The wall split sums to 1 with a small remainder, and the capacity check's run at one
accelerator (the cell's own trainer) lands within the cell's own interval.
"""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
import yaml

from iobench.results.figures import ACCOUNT_PARTS
from tests.helpers.runs import SLEEPING_H100

H100 = {"kind": "emulated", "type": "h100", "model": "resnet50", "demand": "training"}
JITTERY = {**SLEEPING_H100, "compute": {"dist": "lognormal", "cv": 0.2}}
SMALL_CNN = {"kind": "torch", "model": "small_cnn"}
# the part of the wall no named part explains (the step loop's own bookkeeping) stays below this
LOOP_AT_MOST = 0.02


def _sweep(iobench_sweep, root, name: str, dataset, accelerators: list, **run) -> tuple:
    cfg = {
        "dataset": {"path": str(dataset)},
        "tiers": [{"kind": "local", "name": "disk"}],
        "loaders": [{"kind": "torch", "workers": [0, 2], "batch_size": [16], "shuffle_buffer": 32}],
        "accelerators": accelerators,
        "run": {"warmup_steps": "auto", "min_measure": {"steps": 24, "seconds": 2}, **run},
    }
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = root / name
    proc = iobench_sweep.run("sweep", path, "--out", out, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


@pytest.fixture(scope="module")
def runs(iobench_sweep, tmp_path_factory, tiny_dataset):
    root = tmp_path_factory.mktemp("one-account")
    one = _sweep(iobench_sweep, root, "matrix", tiny_dataset, [H100, JITTERY, SMALL_CNN], diagnose=True)
    two = _sweep(
        iobench_sweep,
        root,
        "ranks",
        tiny_dataset,
        [SLEEPING_H100],
        ranks_per_node=2,
        sync="allreduce",
        cache="warm",
    )
    return [one, two]


def _summaries(out):
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob("*/summary.json"))}


def _measured_accounts(out, cell_id: str) -> list[dict]:
    return [r for r in pq.read_table(out / cell_id / "steps.parquet").to_pylist() if not r["warmup"]]


def test_every_place_shows_the_same_au(runs, iobench):
    for out, _ in runs:
        rows = {r["cell_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
        report = json.loads(iobench("report", out, "--json").stdout)
        as_json = {s["cell"]["cell_id"]: s for s in report["cells"]}
        wide = {**os.environ, "COLUMNS": "400"}  # one row per cell, however long its id
        mlperf = iobench("report", out, "--mlperf", env=wide).stdout
        html = iobench("report", out, "--html")
        assert html.returncode == 0, html.stderr
        page = (out / "report.html").read_text()
        for cell_id, s in _summaries(out).items():
            assert s["status"] == "ok", s.get("error")
            au = s["metrics"]["au"]
            assert rows[cell_id]["au"] == au
            assert as_json[cell_id]["metrics"]["au"] == au
            # the epochs' AU inside the window, weighted by their window seconds
            epochs = [e for e in s["epochs"] if e["window_au"] is not None]
            weighted = sum(e["window_au"] * e["window_s"] for e in epochs) / sum(
                e["window_s"] for e in epochs
            )
            assert weighted == pytest.approx(au, rel=1e-6), cell_id
            # the MLPerf view: the cell's AU beside DLIO's, both on the device busy
            row = next(line for line in mlperf.splitlines() if cell_id in line)
            assert f" {100 * au:.2f} " in row, (cell_id, row)
            # the HTML table's AU column
            assert f"<td>{au:.2f}</td>" in page
            # the device busy of the measured steps' accounts over their spans, straight from steps.parquet
            if s["cell"]["run"]["ranks_per_node"] == 1:
                steps = _measured_accounts(out, cell_id)
                busy = sum(r["account_device_s"] for r in steps)
                span = sum(r["account_span_s"] for r in steps)
                assert busy / span == pytest.approx(au, rel=1e-9), cell_id


def test_dlios_form_is_taken_on_the_device_busy_too(runs):
    out, _ = runs[0]
    for cell_id, s in _summaries(out).items():
        steps = pq.read_table(out / cell_id / "steps.parquet").to_pylist()
        for figures in s["epochs"]:
            mine = sorted((r for r in steps if r["epoch"] == figures["epoch"]), key=lambda r: r["t_end"])
            if len(mine) < 2:
                continue
            dlio = sum(r["account_device_s"] for r in mine[1:]) / (mine[-1]["t_end"] - mine[0]["t_end"])
            assert figures["au_mlperf"] == pytest.approx(dlio, rel=1e-9), cell_id
        dlios = [pytest.approx(e["au_mlperf"]) for e in s["epochs"] if e["au_mlperf"] is not None]
        assert s["mlperf"]["epoch_au"] == dlios


def test_the_wall_split_sums_to_one_and_names_nearly_all_of_it(runs):
    for out, _ in runs:
        for cell_id, s in _summaries(out).items():
            split = s["split"]
            assert sum(split[p] for p in ACCOUNT_PARTS) == pytest.approx(1.0, abs=1e-9), cell_id
            # the loop's bookkeeping is microseconds a step; a pause of the whole process between two
            # steps is booked there too (twice 175-180 ms in one cell of a full suite on this VM,
            # 0.08 ms the median step): the two longest are left out of the bound, not of the split
            steps = [r for r in pq.read_table(out / cell_id / "steps.parquet").to_pylist() if not r["warmup"]]
            loops = sorted(r["account_loop_s"] for r in steps)
            span = sum(r["account_span_s"] for r in steps)
            assert sum(loops[:-2]) <= LOOP_AT_MOST * span, (cell_id, split)
            assert split["device"] == pytest.approx(s["metrics"]["au"], rel=1e-9)
            assert split["device"] + split["host"] == pytest.approx(s["metrics"]["compute_s"] / (
                s["metrics"]["wall_s"] * s["cell"]["run"]["ranks_per_node"]), rel=1e-6)  # fmt: skip
            # every step's parts sum to its span
            for r in pq.read_table(out / cell_id / "steps.parquet").to_pylist():
                parts = sum(r[f"account_{p}_s"] for p in ACCOUNT_PARTS)
                assert parts == pytest.approx(r["account_span_s"], abs=1e-9)


def test_the_capacity_check_runs_the_cells_own_trainer(runs):
    out, _ = runs[0]
    checked = 0
    for cell_id, s in _summaries(out).items():
        cap = (s.get("attribution") or {}).get("capacity")
        if not cap:
            continue
        ones = [c for c in cap["checks"] if c["count"] == 1]
        if not ones:
            continue
        au, ci = s["metrics"]["au"], s["window"]["au_rel_ci"] or 0.0
        # the same trainer on the same tier and loader: within the cell's own interval (its window's
        # batch means), widened by a noisy shared host's run-to-run drift
        half = au * max(2 * ci, 0.25)
        assert abs(ones[0]["au"] - au) <= half, (cell_id, ones[0], au, ci)
        checked += 1
    assert checked >= 2  # the emulated cells at both worker counts


def test_recommends_validation_reads_the_same_au(runs, iobench):
    out, _ = runs[0]
    proc = iobench(
        "recommend", "--dataset-size", "1GB", "--sample-size", "110KB", "--accelerators", "1xH100",
        "--results", out, "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    checks = json.loads(proc.stdout)["validation"]
    summaries = _summaries(out)
    assert checks
    for check in checks:
        assert check["measured_au"] == summaries[check["cell"]]["metrics"]["au"]


def test_a_two_rank_cell_uses_the_same_functions_over_its_common_interval(runs):
    out, _ = runs[1]
    for cell_id, s in _summaries(out).items():
        d, ranks = s["distributed"], s["ranks"]
        wall = d["interval"]["wall_s"]
        # the job's AU is its ranks' device busy over their time together
        assert s["metrics"]["au"] == pytest.approx(sum(r["au"] for r in ranks) / len(ranks), rel=1e-6), (
            cell_id
        )
        assert d["peer_wait_fraction"] == pytest.approx(s["split"]["peer_wait"], rel=1e-9)
        assert d["free_running_au"] >= s["metrics"]["au"]
        for r in ranks:
            assert r["au"] <= 1.0 and r["peer_wait_s"] <= wall
