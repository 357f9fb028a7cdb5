"""Checkpoints under faults lose nothing: a tier that fills up mid-save fails the save with the tier,
the bytes written and what to do, and the previous checkpoint stays intact and loadable (nothing is
committed before the whole write); an S3 endpoint that dies mid-save is named, leaves no object of the
failed checkpoint once aborted and no multipart upload behind; a damaged checkpoint names its file and
shard. Real faults: a small tmpfs (the kernel's ENOSPC) and a proxy in front of the lab's radosgw that
is stopped in the middle of the save."""

from __future__ import annotations

import os
import threading
import time
import warnings

import boto3
import pytest
import torch

from iobench.checkpoint import writer as writer_module
from iobench.checkpoint.checkpointer import Checkpointer
from iobench.checkpoint.errors import CheckpointError, EndpointFailed, TierFull
from iobench.checkpoint.state import synthetic_state
from iobench.checkpoint.targets import make_target
from iobench.checkpoint.timing import timed_load
from iobench.results.checkpoint import CheckpointDestination
from tests.helpers.faultproxy import FaultProxy
from tests.helpers.mounts import mounted_tmpfs

warnings.filterwarnings("ignore", message=".*single process.*")
MIB = 1 << 20


def _same(a: dict, b: dict) -> bool:
    return all(
        torch.equal(a[k].view(torch.uint8), b[k].view(torch.uint8))
        for k in a
        if isinstance(a[k], torch.Tensor)
    )


def _save_twice(target, state) -> tuple[Checkpointer, BaseException]:
    """One checkpoint saved, then a second one that fails; the checkpointer and the failure."""
    saver = Checkpointer(target, "sync", 1, lambda: state, origin=time.perf_counter())
    saver.after_step(0)
    with pytest.raises(CheckpointError) as failed:
        saver.after_step(1)
    return saver, failed.value


@pytest.mark.parametrize("preallocate", [True, False], ids=["preallocated", "written-until-full"])
def test_a_full_tier_fails_the_save_by_name_and_keeps_the_previous_checkpoint(
    tmp_path, monkeypatch, preallocate
):
    """20 MiB of state on a 32 MiB tmpfs: the first checkpoint fits, the second cannot. Preallocated,
    the writer learns it before its first byte; without (a file system that cannot preallocate) the
    kernel says ENOSPC in the middle of the writes."""
    if not preallocate:
        monkeypatch.setattr(writer_module, "_reserve", lambda handle, nbytes: None)
    state = synthetic_state(20 * MIB)
    with mounted_tmpfs(tmp_path / "disk", "32m") as disk:
        target = make_target(CheckpointDestination("tmpfs", {"kind": "local", "path": str(disk)}, str(disk)))
        _, failure = _save_twice(target, state)
        assert isinstance(failure, TierFull)
        text = str(failure)
        assert (
            f"local disk {disk} is full" in text
            and "of 20.0 MiB" in text
            and "previous checkpoint is intact" in text
        )
        assert "Free space on the tier" in text
        if not preallocate:
            assert 0 < failure.written < failure.total  # it failed mid-save, with bytes on the disk
        assert sorted(os.listdir(disk)) == ["step-00000000"]  # no step-00000001, no .partial left
        restored, out = timed_load(target, state, "step-00000000", cold=True)
        assert _same(state, out)
        print(f"figures: {text} | restored the previous checkpoint at {restored.gb_per_s:.2f} GB/s")


@pytest.fixture
def s3_checkpoints(lab_env):
    s3 = boto3.client("s3")
    bucket = "iobench-ckpt-faults"
    if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=bucket)
    return s3, bucket


def _dies_mid_save(proxy: FaultProxy) -> threading.Thread:
    """Stops the proxy once the next save's first write request has reached it."""
    seen = proxy.requests

    def watch() -> None:
        deadline = time.monotonic() + 30
        while proxy.requests <= seen and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)
        proxy.stop()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("writer", ["iobench", "fsspec"])
def test_an_endpoint_that_dies_mid_save_is_named_and_leaves_no_object(lab_env, s3_checkpoints, writer):
    s3, bucket = s3_checkpoints
    url = f"s3://{bucket}/{writer}-{time.time_ns()}"
    state = synthetic_state(72 * MIB)  # more than s3fs' 50 MiB block: a multipart upload
    proxy = FaultProxy(lab_env.env["AWS_ENDPOINT_URL"], latency_s=0.05, methods=("PUT", "POST"))
    proxy.configure(rate=1.0, kinds=["latency"])  # every write held a little: the save outlasts the timer
    proxy.start()
    tier = {"kind": "s3", "url": url, "endpoint_url": proxy.endpoint, "deadline_s": 5}
    target = make_target(CheckpointDestination("s3", tier, url, writer))  # type: ignore[arg-type]
    saver = Checkpointer(target, "sync", 1, lambda: state, origin=time.perf_counter())
    saver.after_step(0)  # the previous checkpoint, whole
    killer = _dies_mid_save(proxy)
    with pytest.raises(CheckpointError) as failed:
        saver.after_step(1)
    killer.join()
    text = str(failed.value)
    assert proxy.endpoint.split("//")[1] in text or "Connect" in text or "connect" in text, text
    assert "nothing of" in text and "committed" in text
    # the endpoint answers again (the real one): the failed checkpoint's leftovers are aborted
    direct = {**tier, "endpoint_url": lab_env.env["AWS_ENDPOINT_URL"]}
    healthy = make_target(CheckpointDestination("s3", direct, url, writer))  # type: ignore[arg-type]
    healthy.abort(healthy.checkpoint_id("step-00000001"))
    prefix = url.split("/", 3)[3] + "/step-00000001"
    left = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount", 0)
    uploads = s3.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])
    assert left == 0 and uploads == [], (left, uploads)
    restored, out = timed_load(healthy, state, "step-00000000", cold=True)
    assert _same(state, out)
    if isinstance(failed.value, EndpointFailed):
        assert "S3 endpoint" in text
    print(f"figures: {writer}: {text[:300]} | previous checkpoint restored at {restored.gb_per_s:.2f} GB/s")
