"""Processes that die mid-epoch: a DataLoader worker SIGKILLed, and one of two training processes
sharing a shard cache SIGKILLed in the middle of a download (against the lab's radosgw).

(The sweep process killed at random points and resumed is in test_sweep_resume.py; radosgw and the
OSD restarted mid-epoch in test_ceph_faults.py.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from iobench.datasets.manifest import Manifest
from iobench.tiers.s3 import S3Tier
from loaders import ShardFormatError, ShardLoader
from loaders.observe import LoaderCounters
from tests.helpers.faultkit import cache_problems, dataset_pairs, stage_copy
from tests.helpers.faultproxy import FaultProxy
from tests.helpers.paths import ROOT as REPO
from tests.helpers.shardkit import make_shards, small_config

ROOT = str(REPO)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_a_killed_dataloader_worker_fails_the_epoch_clearly_and_leaves_no_process(tmp_path):
    urls = make_shards(tmp_path, n_shards=8, per_shard=40)
    before = _children()
    loader = ShardLoader(small_config(urls, workers=2, batch_size=8))
    it = iter(loader)
    next(it)
    workers = _children() - before
    assert len(workers) == 2
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        for _ in it:
            pass
    print(
        f"figures: worker SIGKILL: the epoch failed {time.monotonic() - t0:.2f} s after the kill: {info.value}"
    )
    assert time.monotonic() - t0 < 60  # a hang guard: torch notices a dead worker by SIGCHLD
    # torch's two ways of noticing, whichever comes first: its SIGCHLD handler, or the next get
    assert str(info.value).startswith(
        (
            f"DataLoader worker (pid(s) {victim}) exited unexpectedly",
            f"DataLoader worker (pid {victim}) is killed by signal: Killed",
        )
    ), str(info.value)
    del it, info
    deadline = time.monotonic() + 15
    while _children() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children() - before == set()  # the surviving worker was stopped too
    # and the loader is usable again: the next epoch starts fresh workers and delivers everything
    assert sum(len(b.keys) for b in loader) == 8 * 40


def _wait_until_idle(processes: list[psutil.Process], timeout_s: float = 10.0) -> None:
    """Until ``processes`` used no CPU over a tenth of a second (a worker blocked with its batches
    made), or ``timeout_s``."""
    last = None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        used = sum(sum(p.cpu_times()[:2]) for p in processes)
        if used == last:
            return
        last = used
        time.sleep(0.1)


def test_a_shard_truncated_under_a_worker_is_an_error_naming_it_not_a_bus_error(tmp_path):
    """A mapped shard cut short while a worker reads it: reading past the new end of the mapping
    would kill the worker with SIGBUS, which torch reports as "out of shared memory" naming no file.
    The reader checks the size first: a ShardFormatError naming the shard and how it shrank."""
    (url,) = make_shards(tmp_path, n_shards=1, per_shard=300)
    size = os.path.getsize(url)
    loader = ShardLoader(small_config([url], workers=1, batch_size=8))
    it = iter(loader)
    next(it)
    # the check and the copy are two steps (loaders/storage/localfile.py): a shrink between them is
    # still SIGBUS, so the file is cut while the worker waits with its prefetched batches, not mid-read
    _wait_until_idle(psutil.Process().children())
    os.truncate(url, 8192)  # a rewrite in place: the worker's later reads fall past the end
    with pytest.raises(ShardFormatError) as info:
        for _ in it:
            pass
    message = str(info.value)
    print(f"figures: shard truncated under worker 0: {message.splitlines()[-1]}")
    assert f"{url}: the shard shrank from {size:,} to 8,192 bytes while it was read" in message
    assert "rename them into place" in message and "at byte offset" in message


# A training process in a few lines: read one epoch of the staged dataset through the shared cache,
# after a "go" on stdin (so that the test decides who starts downloading first).
_TRAINER = """
import json, sys
sys.path.insert(0, {root!r})
from loaders import ShardLoader
args = json.loads(sys.argv[1])
loader = ShardLoader(args["urls"], workers=0, return_batches=True, batch_size=16, shuffle_buffer=8,
                     storage_options=args["options"], cache_dir=args["cache"], cache_bytes=10**9,
                     shard_sizes=args["sizes"], part_bytes=256 * 1024, concurrency=1)
print("ready", flush=True)
sys.stdin.readline()
pairs = [[k, int(label)] for b in loader for k, label in zip(b.keys, b.labels.tolist())]
print(json.dumps({{"pairs": pairs, "counters": loader.stats.counters.as_flat()}}), flush=True)
"""


def _trainer(url: str, manifest: Manifest, endpoint: str, cache: Path) -> subprocess.Popen:
    tier = S3Tier(url=url, endpoint_url=endpoint)
    urls = tier.shard_urls(manifest)
    args = {
        "urls": urls,
        "options": tier.storage_options(),
        "cache": str(cache),
        "sizes": {u: s.bytes for u, s in zip(urls, manifest.shards, strict=True)},
    }
    return subprocess.Popen(
        [sys.executable, "-c", _TRAINER.format(root=ROOT), json.dumps(args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _go(proc: subprocess.Popen) -> None:
    proc.stdin.write("go\n")
    proc.stdin.flush()


def _partial_download(cache: Path, pid: int) -> Path:
    """The temp file of ``pid``'s download once some of its bytes are on disk."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for part in cache.glob(f".part-*.{pid}.*"):
            if part.stat().st_size > 0:
                return part
        time.sleep(0.01)
    raise AssertionError(f"process {pid} wrote no shard bytes into {cache} within 60 s")


def _until_blocked_in_flock(pid: int) -> None:
    """Wait until ``pid`` is queued on a flock: the kernel lists waiters in /proc/locks as '->'."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open("/proc/locks") as f:
            if any("-> FLOCK" in line and line.split()[5] == str(pid) for line in f):
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never waited on a cache lock")


def test_a_trainer_killed_mid_download_leaves_the_shared_cache_whole(
    ceph_lab, tiny_dataset, tmp_path, monkeypatch
):
    """The victim reads through a proxy that holds every request 0.25 s, so its first shard takes
    seconds to download; it is SIGKILLed once part of the shard is in its temp file and the survivor,
    reading the same shards in the same order, is queued on that shard's lock. The survivor must get
    every sample, and the cache must be left with whole shards only and no lock held."""
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    url = stage_copy(ceph_lab, tiny_dataset, "sharedcache")
    manifest, want = Manifest.load(tiny_dataset), dataset_pairs(tiny_dataset)
    cache = tmp_path / "cache"
    with FaultProxy(ceph_lab.env["AWS_ENDPOINT_URL"], rate=1.0, kinds=["latency"], latency_s=0.25) as slow:
        victim = _trainer(url, manifest, slow.endpoint, cache)
        survivor = _trainer(url, manifest, ceph_lab.env["AWS_ENDPOINT_URL"], cache)
        try:
            assert victim.stdout.readline() == survivor.stdout.readline() == "ready\n"
            _go(victim)
            part = _partial_download(cache, victim.pid)
            _go(survivor)
            _until_blocked_in_flock(survivor.pid)  # on the lock of the shard the victim downloads
            half = part.stat().st_size
            victim.kill()
            victim.wait(10)
            out, _ = survivor.communicate(timeout=120)
        finally:
            for proc in (victim, survivor):
                proc.kill()
                proc.wait(10)
    assert victim.returncode == -signal.SIGKILL and survivor.returncode == 0
    result = json.loads(out.splitlines()[-1])
    c = LoaderCounters.from_flat(result["counters"]).cache
    assert c is not None
    got = sorted(map(tuple, result["pairs"]))
    assert got == sorted(want.elements())  # every sample exactly once, with its label
    assert c.misses + c.hits == len(manifest.shards) and c.wait_s > 0
    urls = S3Tier(url=url).shard_urls(manifest)
    assert cache_problems(cache, {u: s.sha256 for u, s in zip(urls, manifest.shards, strict=True)}) == []
    assert len(list(cache.glob("[0-9a-f]*"))) == len(manifest.shards)
    print(
        f"figures: trainer SIGKILL mid-download ({half} bytes in its temp file): the survivor waited "
        f"{c.wait_s:.2f} s, verified {len(got)} samples and {len(manifest.shards)} cached shards; 0 lost"
    )
