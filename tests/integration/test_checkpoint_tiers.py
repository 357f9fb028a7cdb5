"""Checkpoints saved to and restored from the lab's real tiers (CephFS, S3 through torch's fsspec
writer and iobench's own, RADOS through iobench's own), bit for bit, with their requests timed; an
MLPerf Storage checkpointing run on two ranks."""

from __future__ import annotations

import json
import time
import warnings

import boto3
import pytest
import torch

from iobench.checkpoint.aligned import byte_view
from iobench.checkpoint.state import synthetic_state
from iobench.checkpoint.targets import make_target
from iobench.checkpoint.timing import timed_load, timed_save
from iobench.results.checkpoint import CheckpointDestination

warnings.filterwarnings("ignore", message=".*single process.*")
BUCKET = "iobench-ckpt-tiers"


def _destinations(lab) -> list[CheckpointDestination]:
    run = f"t{time.time_ns()}"
    s3 = {"kind": "s3", "url": f"s3://{BUCKET}/x", "endpoint_url": lab.env["AWS_ENDPOINT_URL"]}
    out = [
        CheckpointDestination("s3-fsspec", s3, f"s3://{BUCKET}/{run}-f", "fsspec"),
        CheckpointDestination("s3-iobench", s3, f"s3://{BUCKET}/{run}-i", "iobench"),
        CheckpointDestination(
            "rados",
            {"kind": "rados", "url": "rados://iobench-ckpt/x", "conffile": str(lab.conf)},
            f"rados://iobench-ckpt/{run}",
        ),
    ]
    if lab.mount is not None:
        out.append(
            CheckpointDestination("cephfs", {"kind": "cephfs", "path": str(lab.mount)}, f"{lab.mount}/{run}")
        )
    return out


@pytest.fixture(scope="module")
def bucket(lab_env):
    s3 = boto3.client("s3")
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    return BUCKET


def test_every_tier_restores_what_it_saved(lab_env, bucket):
    state = synthetic_state(8 << 20)
    for dest in _destinations(lab_env):
        target = make_target(dest)
        saved = timed_save(target, state, "step-1")
        restored, out = timed_load(target, state, "step-1", cold=True)
        same = all(torch.equal(byte_view(state[k]), byte_view(out[k])) for k in state if k != "step")
        assert same, dest.name
        assert saved.requests.seconds and restored.requests.seconds, dest.name
        target.remove(target.checkpoint_id("step-1"))
        print(
            f"figures: {dest.name} ({target.writer_name}): save {saved.gb_per_s:.2f} GB/s, restore {restored.gb_per_s:.2f} GB/s"
        )


def test_mlperf_checkpointing_on_two_ranks_reports_its_fields(iobench, tmp_path):
    out = tmp_path / "mlperf.json"
    proc = iobench(
        "checkpoint",
        "--model",
        "llama3-8b",
        "--to",
        str(tmp_path / "ckpt"),
        "--ranks",
        "2",
        "--size",
        "16MiB",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["num_processes"] == 2 and result["checkpoint_bytes"] == 16 << 20
    assert result["save_throughput_gb_per_s_mean"] > 0 and result["load_throughput_gb_per_s_mean"] > 0
    assert [p["what"] for p in result["phases"]] == ["save", "load"]
    assert "llama3-8b" in proc.stdout and "MLPerf: 8" in proc.stdout
    assert not (tmp_path / "ckpt" / "mlperf-0").exists()  # removed after the run
