"""The deadline mechanisms on their own, without the lab: an S3 endpoint that accepts and never
answers, one that refuses, a file whose open and read block in the kernel, the two-line error with
its hint, the sweep's stall watch, the run.stall_timeout and deadline_s keys, and the RAM-cache
bookkeeping. The same mechanisms against the real lab: test_daemon_faults.py, test_ram_cache.py."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from iobench.results.spec import CellSpec, LoaderSettings, RunSettings
from iobench.sweep.checks import ConfigError
from iobench.sweep.config import parse_config
from iobench.sweep.watchdog import StallWatch, describe_processes
from iobench.tiers import TierConfigError, make_tier, ramcache
from iobench.tiers.faults import explain, first_line, likely_cause
from loaders.storage import CLIENT_NAMES
from loaders.storage.deadline import DeadlineFile
from loaders.storage.objectstore import DeadlineExceeded, ObjectReader, ObjectStoreError
from loaders.storage.sources import ShardSource
from loaders.storage.spec import SourceSpec


@contextlib.contextmanager
def _black_hole():
    """A TCP endpoint that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(server.accept()[0])

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        server.close()


def _s3_options(endpoint: str, deadline: float) -> dict:
    from iobench.tiers.s3 import s3_storage_options

    return s3_storage_options(endpoint, "us-east-1", True, deadline_s=deadline)


@pytest.fixture
def any_keys(monkeypatch):
    """Credentials in the environment, where every client looks (no request reaches a server)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


# s3dlio's timeouts are set once per process, by its first client: its case runs in a process of its
# own, so that the 1 s deadline here is not every later s3dlio reader's of the test session
_BLACK_HOLE_S3DLIO = """
import sys, time
from iobench.tiers.s3 import s3_storage_options
from loaders.storage.objectstore import DeadlineExceeded, ObjectReader
reader = ObjectReader(s3_storage_options(sys.argv[1], "us-east-1", True, deadline_s=1.0), client="s3dlio", deadline_s=1.0)
t0 = time.monotonic()
try:
    reader.read_range("s3://bucket/key", 0, 10)
except DeadlineExceeded as exc:
    print(f"{time.monotonic() - t0:.3f}")
    print(exc)
"""


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_an_s3_endpoint_that_never_answers_fails_within_the_deadline(client, any_keys):
    with _black_hole() as endpoint:
        if client == "s3dlio":
            proc = subprocess.run(
                [sys.executable, "-c", _BLACK_HOLE_S3DLIO, endpoint],
                capture_output=True,
                text=True,
                timeout=60,
            )
            took_text, msg = proc.stdout.split("\n", 1)
            took, limits = float(took_text), "whole request within 1 s"
        else:
            reader = ObjectReader(_s3_options(endpoint, 1.0), client=client, deadline_s=1.0)
            t0 = time.monotonic()
            with pytest.raises(DeadlineExceeded) as info:
                reader.read_range("s3://bucket/key", 0, 10)
            took, msg, limits = time.monotonic() - t0, str(info.value), reader.attempt_limits
    print(f"figures: a silent S3 endpoint, deadline 1 s, {client}: DeadlineExceeded after {took:.2f} s")
    assert took < 1 + 3  # the deadline, plus one client start-up
    assert "no answer within the 1 s deadline: 1 attempt in" in msg and endpoint in msg, msg
    assert limits in msg
    hint = likely_cause(DeadlineExceeded(110, msg))
    assert hint.kind == "deadline" and "not a credentials" in hint.text


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_a_refused_endpoint_exhausts_the_retry_budget_long_before_the_deadline(client, any_keys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
    reader = ObjectReader(_s3_options(endpoint, 30.0), client=client, deadline_s=30.0)
    t0 = time.monotonic()
    with pytest.raises(ObjectStoreError) as info:
        reader.read_range("s3://bucket/key", 0, 10)
    took = time.monotonic() - t0
    print(f"figures: a refused S3 endpoint, {client}: failed after {took:.2f} s")
    assert not isinstance(info.value, DeadlineExceeded)
    assert took < 5 and "gave up after 6 attempts" in str(info.value), info.value
    assert likely_cause(info.value).kind == "refused"


def test_a_deadline_stops_retries_that_would_start_past_it():
    calls = []

    class Flaky:
        def cat_file(self, url, start=None, end=None):
            calls.append(time.monotonic())
            time.sleep(0.4)
            raise TimeoutError("read timed out")

    reader = ObjectReader(filesystem=Flaky(), protocol="rados", deadline_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded) as info:
        reader.read_range("rados://pool/key", 0, 10)
    assert time.monotonic() - t0 < 1.0 + 0.4 + 0.1 and 2 <= len(calls) < 6
    assert f"{len(calls)} attempts in" in str(info.value)
    stats = reader.take_stats().counts
    assert stats.requests == len(calls) and stats.failures == 1 and stats.retries == len(calls) - 1


@pytest.fixture
def fifo(tmp_path):
    """A named pipe: open() blocks until a writer comes, read() until it writes. Released after."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    yield path
    # free the helper threads blocked on it: a writer that opens and closes ends their calls
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)


def test_a_file_whose_open_blocks_fails_within_the_deadline(fifo):
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=r"opening .*fifo: no progress within the 0.5 s deadline"):
        DeadlineFile(str(fifo), 0.5)
    assert time.monotonic() - t0 < 1.5


def test_a_file_whose_read_blocks_fails_within_the_deadline(fifo):
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import time; f = open({str(fifo)!r}, 'wb'); time.sleep(30)"]
    )
    try:
        f = DeadlineFile(str(fifo), 0.5)
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded, match=r"reading .*fifo at byte 0: no progress"):
            f.read(10)
        assert time.monotonic() - t0 < 1.5
        t0 = time.monotonic()
        f.close()  # does not wait for a file system that hangs
        assert time.monotonic() - t0 < 0.2
    finally:
        holder.kill()
        holder.wait()


def test_a_deadline_file_reads_what_open_reads(tmp_path):
    data = os.urandom(3 * (1 << 20) + 12345)
    path = tmp_path / "shard.tar"
    path.write_bytes(data)
    with DeadlineFile(str(path), 5, buffer_size=1 << 20) as f:
        parts = []
        while chunk := f.read(100_000):
            parts.append(chunk)
        assert b"".join(parts) == data and f.tell() == len(data)
        f.seek(-10, os.SEEK_END)
        assert f.read() == data[-10:]
        f.seek(5)
        assert f.read(3) == data[5:8] and f.tell() == 8
        assert f.read(2 << 20) == data[8 : 8 + (2 << 20)]
    source = ShardSource(SourceSpec(deadline_s=5))
    with source.open(str(path)) as f:
        assert isinstance(f, DeadlineFile) and f.read() == data
    assert source.read_object(str(path)) == data


# ------------------------------------------------------------------ the error in the summary


def _worker_error() -> DeadlineExceeded:
    """What torch hands the training loop when a DataLoader worker raised (its traceback inside)."""
    return DeadlineExceeded(
        "Caught DeadlineExceeded in DataLoader worker process 1.\nOriginal Traceback (most recent call last):\n"
        '  File "/x/torch/utils/data/_utils/worker.py", line 403, in _worker_loop\n    data = fetcher.fetch(index)\n'
        "loaders.storage.objectstore.DeadlineExceeded: [Errno 110] GET s3://b/k (endpoint http://h:1): no answer within "
        "the 30 s deadline: 1 attempt in 30.0 s (each attempt: connect timeout 5 s, read timeout 30 s), last "
        "error: Read timeout\n"
    )


def test_the_summary_error_is_two_lines_with_the_likely_cause():
    spec = {"kind": "s3", "url": "s3://b/k", "endpoint_url": "http://h:1"}
    text = explain(_worker_error(), spec)
    cause, hint = text.splitlines()
    assert cause.startswith("DeadlineExceeded: GET s3://b/k") and cause.endswith("(in DataLoader worker 1)")
    assert "Traceback" not in text and "[Errno" not in cause and "line 403" not in text
    assert hint.startswith("hint: the storage stopped answering (s3://b/k at http://h:1)")
    assert "not a credentials or staging problem" in hint  # the 403-in-a-traceback trap too
    assert likely_cause(PermissionError(13, "AccessDenied")).kind == "credentials"
    assert likely_cause(FileNotFoundError(2, "NoSuchBucket")).kind == "missing"
    assert likely_cause(ConnectionRefusedError(111, "Connection refused")).kind == "refused"
    assert likely_cause(OSError(5, "disk on fire")).kind == "other"
    shm = "unable to allocate shared memory(shm) for file </torch_1_2_3>: No space left on device (28)"
    assert likely_cause(RuntimeError(shm)).kind == "shm"  # not "a disk or the cluster is full"
    assert likely_cause(OSError(28, "No space left on device")).kind == "full"
    rados = explain(
        TimeoutError(110, "timed out"), {"kind": "rados", "url": "rados://pool/p", "conffile": "/c"}
    )
    assert "pool pool (rados://pool/p) of the cluster of /c" in rados
    assert len(first_line("x" * 5000)) <= 601


def test_the_stall_watch_arms_with_the_step_loop_and_names_the_last_batch():
    watch = StallWatch(limit_s=10)
    watch.see(None, None, now=0.0)
    assert watch.stalled_for(now=100.0) is None  # not armed before the first measured run
    watch.see({"run": 1, "steps": 0}, 1_700_000_000.0, now=1.0)
    assert watch.stalled_for(now=10.0) is None
    watch.see({"run": 1, "steps": 5}, 1_700_000_005.0, now=5.0)
    watch.see({"run": 1, "steps": 5}, 1_700_000_006.0, now=14.0)  # the same batch: no progress
    assert watch.stalled_for(now=14.0) is None and watch.stalled_for(now=15.5) == pytest.approx(10.5)
    paused = StallWatch(limit_s=10)  # between measured runs (the tier prepared again): not counted
    paused.see({"run": 1, "steps": 40}, 1.0, now=0.0)
    paused.see({"run": 1, "steps": None, "paused": "preparing the tier for measured run 2"}, 2.0, now=1.0)
    assert paused.stalled_for(now=500.0) is None
    paused.see({"run": 2, "steps": 0}, 3.0, now=500.0)
    assert paused.stalled_for(now=505.0) is None and paused.stalled_for(now=511.0) == pytest.approx(11.0)
    cell = CellSpec(
        cell_id="c",
        tier={"kind": "rados", "name": "ceph", "url": "rados://p/d", "conffile": "/etc/ceph.conf"},
        loader=LoaderSettings(kind="torch", workers=1, batch_size=16),
        accelerator=None,  # type: ignore[arg-type]
        cache="cold",
        run=RunSettings(),
        dataset="/d",
    )
    cause, hint = watch.message(cell, 10.5, "").splitlines()
    assert cause.startswith("stalled: no batch for 10 s (run.stall_timeout=10 s)")
    assert "step 5 of measured run 1" in cause and "22:13:25 UTC" in cause and "pool p (rados://p/d)" in cause
    assert hint.startswith("hint: ") and "raise run.stall_timeout" in hint
    assert describe_processes(os.getpgid(0))  # this test's own group: some processes, none blocked


def test_run_stall_timeout_and_tier_deadline_s_are_checked_keys(tmp_path):
    def config(run=None, tier=None) -> dict:
        return {
            "dataset": {"path": str(tmp_path)},
            "tiers": [tier or {"kind": "local", "name": "d", "path": str(tmp_path)}],
            "loaders": [{"kind": "torch", "workers": [0], "batch_size": [8]}],
            "accelerators": [{"kind": "emulated", "type": "h100", "model": "resnet50"}],
            "run": run or {},
        }

    assert parse_config(config()).cells()[0].run.stall_timeout == RunSettings().stall_timeout == 120
    assert parse_config(config({"stall_timeout": 7})).cells()[0].run.stall_timeout == 7
    for bad in (0, -1, "1m", True):
        with pytest.raises(ConfigError, match=r"run\.stall_timeout"):
            parse_config(config({"stall_timeout": bad}))
    s3 = {"kind": "s3", "name": "s", "url": "s3://b/p"}
    assert make_tier(s3).deadline_s == 30 and make_tier({**s3, "deadline_s": 2.5}).deadline_s == 2.5
    assert make_tier({**s3, "deadline_s": 4}).storage_options()["config_kwargs"]["read_timeout"] == 4
    for bad in (0, -3, 7200):
        with pytest.raises(TierConfigError, match="deadline_s"):
            make_tier({**s3, "deadline_s": bad})
    with pytest.raises(TierConfigError, match="deadline_s"):
        make_tier({**s3, "deadline_s": "soon"})
    with pytest.raises(TierConfigError, match="keep_memory_cache is set but memory_cache is not"):
        make_tier({**s3, "keep_memory_cache": True})


def test_ram_caches_are_claimed_released_and_found_when_left(tmp_path, monkeypatch):
    root = str(tmp_path)
    mine = ramcache.ram_cache_path("a/b c", root=root)
    assert os.path.dirname(mine) == root and os.path.basename(mine).startswith("iobench-cache-a_b_c-")
    ramcache.claim(mine, "/runs/x", keep=False)
    (tmp_path / os.path.basename(mine) / "entry.tar").write_bytes(b"x" * 1000)
    dead = ramcache.ram_cache_path("dead", root=root)
    ramcache.claim(dead, "/runs/y", keep=False)
    with open(os.path.join(dead, ramcache.OWNER_FILE)) as f:
        owner = json.load(f)
    owner["sweep_pid"] = 2**22 + 17  # no such process
    with open(os.path.join(dead, ramcache.OWNER_FILE), "w") as f:
        json.dump(owner, f)
    found = {os.path.basename(x.path): x for x in ramcache.leftovers(root)}
    assert found[os.path.basename(mine)].owner_alive and found[os.path.basename(mine)].bytes >= 1000
    assert (
        not found[os.path.basename(dead)].owner_alive and found[os.path.basename(dead)].run_dir == "/runs/y"
    )
    assert ramcache.release(mine) >= 1000 and not os.path.exists(mine)
    assert ramcache.release(mine) == 0
