"""Multi-rank cells: torchrun + gloo sweeps on this machine (one node of two ranks, and two "nodes"
of one rank each), a rank that fails, ranks sharing a host's shard cache. The arithmetic that turns
ranks into one result, without processes: tests/unit/cell/test_multirank.py."""

from __future__ import annotations

import json
import math
import socket
import tarfile
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from tests.helpers.runs import exact_epochs
from tests.helpers.sweepkit import assert_each_sample_once

# every sweep here runs under a timeout of 300 s: a rank waiting forever is the failure this file tests


def _config(tmp_path: Path, dataset: Path, name: str = "sweep.yaml", **run) -> Path:
    cfg = {
        "dataset": {"path": str(dataset)},
        "tiers": [{"kind": "local", "name": "disk"}],
        "loaders": [{"kind": "torch", "workers": [1], "batch_size": [16], "shuffle_buffer": 32}],
        "accelerators": [{"kind": "emulated", "type": "h100", "model": "resnet50", "demand": "training"}],
        "run": {"warmup_steps": 1, "epochs": 2, "record_keys": True, "min_measure": exact_epochs(), **run},
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def _check_aggregate_is_the_sum_of_ranks(summary: dict, steps: list[dict]) -> None:
    d, ranks, m = summary["distributed"], summary["ranks"], summary["metrics"]
    start, end = d["interval"]["start_s"], d["interval"]["end_s"]
    assert [r["rank"] for r in ranks] == list(range(d["world_size"]))
    for r in ranks:
        # each rank's figure, recounted from its own recorded steps in the common interval
        mine = [s for s in steps if s["rank"] == r["rank"] and start < s["t_end"] <= end]
        assert r["samples"] == sum(s["samples"] for s in mine) > 0
        assert r["bytes_read"] == sum(s["bytes_read"] for s in mine) > 0
        assert 0 < r["au"] <= 1 and 0 < r["stall_fraction"] <= 1
    assert m["samples"] == sum(r["samples"] for r in ranks)
    assert m["bytes_read"] == sum(r["bytes_read"] for r in ranks)
    assert math.isclose(m["samples_per_s"], sum(r["samples_per_s"] for r in ranks), rel_tol=1e-12)
    assert math.isclose(m["bytes_per_s"], sum(r["bytes_per_s"] for r in ranks), rel_tol=1e-12)
    assert d["samples_per_s"] == m["samples_per_s"] and m["wall_s"] == end - start
    rates = [r["samples_per_s"] for r in ranks]
    assert d["skew"] == max(rates) / min(rates)
    assert d["slowest_rank"] == rates.index(min(rates))


def test_a_two_rank_sweep_reads_disjoint_samples_and_sums_its_ranks(iobench_sweep, tmp_path, tiny_dataset):
    out = tmp_path / "run"
    # free-running ranks (sync: none): each reads its whole share, and the job is their sum
    proc = iobench_sweep.run(
        "sweep", _config(tmp_path, tiny_dataset, ranks_per_node=2, sync="none"), "--out", out, timeout=300
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    assert row["status"] == "ok" and row["cell_id"].endswith("-r2")
    cell_dir = out / row["cell_id"]
    summary = json.loads((cell_dir / "summary.json").read_text())
    steps = pq.read_table(cell_dir / "steps.parquet").to_pylist()
    assert {s["rank"] for s in steps} == {0, 1}
    # every sample once per epoch across the two ranks: the shard split is disjoint and covering
    assert sum(s["samples"] for s in steps) == 2 * 256
    assert_each_sample_once(cell_dir, tiny_dataset, world_size=2, epochs=2)
    _check_aggregate_is_the_sum_of_ranks(summary, steps)
    assert [e["samples"] for e in summary["epochs"]] == [256, 256]
    d = summary["distributed"]
    assert (row["world_size"], row["nodes"], row["slowest_rank"]) == (2, 1, d["slowest_rank"])
    assert row["rank_skew"] == d["skew"] and row["samples_per_s"] == d["samples_per_s"]
    assert row["rank_au_min"] == min(r["au"] for r in summary["ranks"])
    # the detailed report shows every rank, the skew and the slowest rank
    flat = " ".join(iobench_sweep.run("report", out, "--detail").stdout.split())
    assert "rank 0 (" in flat and "rank 1 (" in flat, flat
    assert f"skew {d['skew']:.2f}" in flat and f"slowest rank {d['slowest_rank']} on" in flat


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_run_one_cell_and_both_record_its_result(iobench_sweep, tmp_path, tiny_dataset):
    """Two sweeps, as two nodes of one rank each, meet at node 0's endpoint (here on one machine)."""
    config = _config(tmp_path, tiny_dataset, nodes=2, epochs=1, sync="none")  # every share read whole
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = [
        iobench_sweep.start(
            config, "--out", tmp_path / f"node{k}", "--rdzv-endpoint", endpoint, "--node-rank", k
        )
        for k in (0, 1)
    ]
    logs = [p.communicate(timeout=300)[0] for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], logs
    (cell_id,) = [r["cell_id"] for r in pq.read_table(tmp_path / "node0" / "results.parquet").to_pylist()]
    assert cell_id.endswith("-n2r1")
    summaries = [json.loads((tmp_path / f"node{k}" / cell_id / "summary.json").read_text()) for k in (0, 1)]
    assert summaries[0] == summaries[1]  # node 1 records rank 0's result, so both resume alike
    assert summaries[0]["distributed"]["nodes"] == 2 and summaries[0]["device_read_bytes_per_s"] is None
    assert [r["node_rank"] for r in summaries[0]["ranks"]] == [0, 1]
    steps = pq.read_table(tmp_path / "node0" / cell_id / "steps.parquet").to_pylist()
    assert_each_sample_once(tmp_path / "node0" / cell_id, tiny_dataset, world_size=2, epochs=1)
    _check_aggregate_is_the_sum_of_ranks(summaries[0], steps)
    assert not (tmp_path / "node1" / cell_id / "steps.parquet").exists()  # rank 0 writes the files


def test_a_failing_rank_fails_the_cell_naming_the_rank_and_stops_the_others(
    iobench_sweep, tmp_path, tiny_dataset
):
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in tiny_dataset.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    shard = sorted(bad.glob("*.tar"))[3]
    with tarfile.open(shard) as tf:
        jpeg = next(m for m in tf.getmembers() if m.name.endswith(".jpg"))
    with open(shard, "r+b") as f:  # one undecodable JPEG, the tar intact: only its rank fails
        f.seek(jpeg.offset_data)
        f.write(bytes(64))
    out = tmp_path / "run"
    proc = iobench_sweep.run(
        "sweep", _config(tmp_path, bad, ranks_per_node=2, on_error="fail"), "--out", out, timeout=300
    )
    assert proc.returncode == 1, proc.stderr
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    assert row["status"] == "failed" and row["world_size"] == 2
    assert row["error"].startswith(("rank 0 of 2 (host ", "rank 1 of 2 (host ")), row["error"]
    assert f"{shard}: sample '{jpeg.name[:-4]}'" in row["error"] and "cannot decode" in row["error"]
    assert not list(out.glob(".attempt-*"))  # the scratch with the rank reports is gone


def _shard_of(dataset: Path) -> dict[str, str]:
    out = {}
    for shard in sorted(dataset.glob("*.tar")):
        with tarfile.open(shard) as tf:
            out.update({m.name.rsplit(".", 1)[0]: shard.name for m in tf.getmembers()})
    return out


def test_ranks_on_one_host_share_its_shard_cache(
    ceph_lab, iobench_sweep, monkeypatch, tiny_dataset, tmp_path
):
    """Two ranks over the lab's S3 with one cache directory: each shard is downloaded once by the
    host, and in epoch 2 a rank hits shards the other rank downloaded in epoch 1."""
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    url = f"s3://iobench-{uuid.uuid4().hex[:8]}/tiny"
    tier = {"kind": "s3", "name": "s3", "url": url, "upload": True, "cache_dir": str(tmp_path / "cache")}
    config = _config(tmp_path, tiny_dataset, ranks_per_node=2, sync="none")  # each rank reads all its shards
    cfg = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**cfg, "tiers": [{**tier, "cache_size": "200MB"}]}))
    out = tmp_path / "run"
    proc = iobench_sweep.run("sweep", config, "--out", out, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    summary = json.loads((out / row["cell_id"] / "summary.json").read_text())
    manifest = json.loads((out / row["cell_id"] / "manifest.json").read_text())
    # the object client that read, in a column of its own: the one the tier's description names
    assert row["client"] == summary["client"] == manifest["tier"]["client"] != "auto"
    shards = len(list(tiny_dataset.glob("*.tar")))
    first, second = summary["epochs"]
    # each shard is fetched once by the host, and never again (a download a worker makes while it
    # reads ahead across the boundary is counted with the batch it feeds: epoch 2's, on a busy host)
    assert first["cache_misses"] + second["cache_misses"] == shards and first["cache_misses"] >= shards - 1
    # the even split cuts a shard where one rank's share ends and the next begins: both ranks open
    # it, so an epoch opens each shard once and each cut shard once more
    for epoch in (first, second):
        assert shards <= epoch["cache_misses"] + epoch["cache_hits"] <= shards + 1
    shard_of = _shard_of(tiny_dataset)
    keys = pq.read_table(out / row["cell_id"] / "keys.parquet").to_pylist()
    read: dict[tuple[int, int], set[str]] = {}
    for k in keys:
        read.setdefault((k["rank"], k["epoch"]), set()).add(shard_of[k["key"]])
    # the hits of epoch 2 include shards only the other rank had read: the cache is the host's
    assert read[0, 1] & read[1, 0] or read[1, 1] & read[0, 0]
