"""Synchronous multi-rank cells against known answers, under torchrun (gloo on the CPU):

- two ranks, one reading through a slow link (``only_ranks``), the other the local disk: in step,
  the job runs at twice the slow rank's own pace, and the fast rank's wait for its peer is the
  difference between the two ranks' own step times; ``sync: none`` keeps today's free-running sum;
- an all-reduce modelled longer than the data wait: AU = compute / (compute + all-reduce).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from iobench.datasets.manifest import ShardEntry, build_manifest, sha256_file
from tests.helpers.processes import Sweeps
from tests.helpers.shardkit import make_shards, tiny_jpeg

LATENCY_MS = 150  # per shard opened, on rank 1 only
STEPS = 16


def _sweep(
    sweeps: Sweeps,
    tmp_path: Path,
    dataset: Path,
    name: str,
    tier: dict,
    accelerator: dict,
    workers: int = 0,
    **run,
) -> dict:
    config = {
        "dataset": {"path": str(dataset)},
        "tiers": [tier],
        "loaders": [{"kind": "torch", "workers": [workers], "batch_size": [8], "shuffle_buffer": 0}],
        "accelerators": [{"kind": "emulated", **accelerator}],
        "run": {"ranks_per_node": 2, "warmup_steps": 2, "max_steps": STEPS, "cache": "warm", **run},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / name
    # a rank left waiting in a collective would hang here
    proc = sweeps.run("sweep", path, "--out", out, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    steps = pq.read_table(out / row["cell_id"] / "steps.parquet").to_pylist()
    return {"row": row, "steps": [s for s in steps if not s["warmup"]]}


def _own_step_s(steps: list[dict], rank: int) -> float:
    """A rank's own time per step, its wait for peers left out."""
    mine = [s for s in steps if s["rank"] == rank]
    span = mine[-1]["t_end"] - mine[0]["t_start"]
    return (span - sum(s["peer_wait_s"] for s in mine)) / len(mine)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """Tiny JPEGs (decoding barely costs, so two ranks on two cores do not slow each other) in
    shards of one batch each: every step of a throttled rank opens one shard."""
    out = tmp_path_factory.mktemp("sync") / "ds"
    urls = make_shards(out, n_shards=40, per_shard=8)
    shards = [ShardEntry(Path(u).name, Path(u).stat().st_size, 8, sha256_file(u)) for u in urls]
    jpeg_bytes = 320 * len(tiny_jpeg(0))
    build_manifest(
        shards, classes=1000, class_names=None, source={"test": "sync"}, jpeg_bytes=jpeg_bytes
    ).save(out)
    return out


def test_a_slow_rank_sets_the_pace_and_its_peer_waits_for_it(iobench_sweep, tmp_path, dataset):
    slow_rank_1 = {
        "kind": "throttled",
        "name": "slow1",
        "inner": {"kind": "local", "path": str(dataset)},
        "latency_ms": LATENCY_MS,
        "only_ranks": [1],
    }
    # 50 ms of compute per batch of 8: free-running, the fast rank's 16 steps (0.8 s) must outlast
    # the slow rank's two warm-up steps (0.4 s), or the ranks' measured intervals would not overlap
    # (at 20 ms a step they ended together, 0.37 s, and a CI run lost the race)
    accelerator = {"type": "custom", "samples_per_s": 160}
    free = _sweep(iobench_sweep, tmp_path, dataset, "free", slow_rank_1, accelerator, sync="none")
    step = _sweep(iobench_sweep, tmp_path, dataset, "step", slow_rank_1, accelerator, sync="barrier")

    # free-running: today's aggregate, the sum of what each rank delivered, and nobody waited
    row = free["row"]
    assert row["sync"] == "none" and row["peer_wait_fraction"] == 0.0
    assert all(s["peer_wait_s"] == 0.0 for s in free["steps"])
    slow_free = 8 / _own_step_s(free["steps"], 1)
    fast_free = 8 / _own_step_s(free["steps"], 0)
    assert fast_free > 1.5 * slow_free  # the link made rank 1 the slow one

    # in step: the job runs at twice the slow rank's own pace
    row = step["row"]
    assert row["sync"] == "barrier" and row["world_size"] == 2 and row["slowest_rank"] == 1
    assert row["samples_per_s"] == pytest.approx(2 * slow_free, rel=0.05)
    # and the fast rank's wait for its peer is what separates the two ranks' own step times
    fast = [s for s in step["steps"] if s["rank"] == 0]
    peer_wait = sum(s["peer_wait_s"] for s in fast) / len(fast)
    assert peer_wait == pytest.approx(_own_step_s(step["steps"], 1) - _own_step_s(step["steps"], 0), rel=0.10)
    assert row["verdict"] in ("fetch", "straggler") and row["straggler_cost"] > 0


def test_an_allreduce_longer_than_the_data_wait_sets_au(iobench_sweep, tmp_path, dataset):
    # ResNet-50's 102 MB of gradients over a 125 MB/s link between 2 ranks: an 818 ms ring all-reduce,
    # none of it hidden, against 80 ms of compute and batches prefetched meanwhile (the few ms a
    # step loses to the loop and the collective on this host are then within the 2 %; on a host whose
    # other processes take half its CPU it was 4 % once)
    fabric = {"name": "slow-test-link", "bandwidth": "125MB/s", "latency_us": 10}
    local = {"kind": "local", "name": "disk", "path": str(dataset)}
    accelerator = {"type": "custom", "samples_per_s": 100}
    result = _sweep(
        iobench_sweep,
        tmp_path,
        dataset,
        "allreduce",
        local,
        accelerator,
        workers=1,
        interconnect=fabric,
        allreduce_overlap=0.0,
        max_steps=8,
    )
    row = result["row"]
    compute = 8 / 100
    allreduce = 2 * (2 - 1) / 2 * 25_557_032 * 4 / 125e6 + 2 * (2 - 1) * 10e-6
    assert row["allreduce_ms"] == pytest.approx(1000 * allreduce, rel=1e-6)
    assert row["au"] == pytest.approx(compute / (compute + allreduce), rel=0.02)
    assert row["verdict"] == "allreduce" and row["interconnect"] == "slow-test-link"


def test_ranks_in_step_over_unequal_shards_never_hang_and_read_no_sample_twice(
    iobench_sweep, tmp_path, tiny_dataset
):
    # 9 shards of unequal size over 2 ranks: the loaders split the epoch by sample, so both ranks
    # take the same number of batches and end the epoch together (the path where one rank runs out
    # first is tests/unit/cell/test_steploop.py's)
    local = {"kind": "local", "name": "disk", "path": str(tiny_dataset)}
    config = {
        "dataset": {"path": str(tiny_dataset)},
        "tiers": [local],
        "loaders": [{"kind": "torch", "workers": [1], "batch_size": [16], "shuffle_buffer": 32}],
        "accelerators": [{"kind": "emulated", "type": "h100"}],
        "run": {
            "ranks_per_node": 2,
            "warmup_steps": 1,
            "epochs": 2,
            "record_keys": True,
            # ~7 steps an epoch per rank: the window adds epochs, and the ranks must agree on each
            "min_measure": {"seconds": 0, "steps": 30},
        },
    }
    path = tmp_path / "uneven.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "uneven"
    proc = iobench_sweep.run("sweep", path, "--out", out, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = pq.read_table(out / "results.parquet").to_pylist()
    assert row["sync"] == "allreduce" and row["status"] == "ok"
    steps = pq.read_table(out / row["cell_id"] / "steps.parquet").to_pylist()
    per_rank = [[(s["epoch"], s["step"]) for s in steps if s["rank"] == r] for r in (0, 1)]
    assert per_rank[0] == per_rank[1]  # in step: the same steps on both ranks, epoch ends included
    epochs = row["window_epochs"]
    assert epochs >= 4 and row["window_added_epochs"] == epochs - 2 and row["window_met"]
    assert {e for e, _ in per_rank[0]} == set(range(epochs))
    keys = pq.read_table(out / row["cell_id"] / "keys.parquet").to_pylist()
    for epoch in range(epochs):
        read = [k["key"] for k in keys if k["epoch"] == epoch]
        assert len(read) == len(set(read))  # no sample twice in an epoch across the ranks
    assert row["dropped_batches"] == 0  # equal shares: no rank had a batch its peers lacked
