"""A sweep with checkpoint cells, end to end: the trainer saves while it trains, the steps' ledger
holds the blocked time, the summary, results.parquet, the terminal report and the HTML report show
the saves, the restores, the cost and the verdict, and nothing of the checkpoints is left behind."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from iobench.results.figures import ACCOUNT_PARTS


def _config(tmp_path, dataset) -> str:
    cfg = {
        "dataset": {"path": str(dataset)},
        "tiers": [{"kind": "local", "name": "disk"}],
        "loaders": [{"kind": "torch", "workers": [1], "batch_size": [16]}],
        "accelerators": [{"kind": "torch", "model": "small_cnn"}],
        "run": {"cache": ["warm"], "max_steps": 12, "warmup_steps": 2},
        "checkpoints": {
            "state": {"size": "24MiB"},
            "to": [{"tier": "disk", "path": str(tmp_path / "ckpt"), "io": "direct"}],
            "mode": ["sync", "async_pinned"],
            "every_steps": [3],
            "saves": 2,
        },
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def test_checkpoint_cells_show_saves_restores_and_their_cost(iobench_sweep, tmp_path, tiny_dataset):
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", _config(tmp_path, tiny_dataset), "--out", out)
    assert proc.returncode == 0, proc.stderr
    rows = {r["cell_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    for mode in ("sync", "async_pinned"):
        cell = f"ckpt-disk-{mode}-every3-torch-small_cnn"
        row = rows[cell]
        assert row["status"] == "ok" and row["ckpt_mode"] == mode and row["ckpt_saves"] == 2, row["error"]
        assert row["ckpt_save_gb_per_s_per_node"] > 0 and row["ckpt_restore_cold_gb_per_s_per_node"] > 0
        assert row["ckpt_blocked_s_per_save"] > 0 and row["ckpt_au_with"] > 0
        assert "checkpointing every 3 steps costs" in row["ckpt_verdict"]
        summary = json.loads((out / cell / "summary.json").read_text())["checkpoint"]
        assert [s["step"] for s in summary["saves"]] == [2, 5]
        assert summary["settings"]["state_bytes"] == 24 << 20 and summary["cold_method"]
        steps = pq.read_table(out / cell / "steps.parquet").to_pylist()
        blocked = [s["step"] for s in steps if s["checkpoint_s"] > 0]
        assert blocked == [2, 5]
        for s in steps:  # the blocked time is a part of the step's account, which still tiles it
            parts = sum(s[f"account_{p}_s"] for p in ACCOUNT_PARTS)
            assert parts == pytest.approx(s["account_span_s"], abs=1e-9)
            assert s["account_checkpoint_s"] == pytest.approx(s["checkpoint_s"])
    assert not any((tmp_path / "ckpt").glob("*/step-*"))  # every cell removed its checkpoints
    assert "checkpoints: saves, restores and what they cost training" in proc.stdout
    html = iobench_sweep.run("report", out, "--html")
    assert html.returncode == 0, html.stderr
    page = (out / "report.html").read_text()
    assert 'id="checkpoint-table"' in page and "checkpointing every 3 steps costs" in page
