"""Resources that run out: a cache disk that fills up (a real, small tmpfs: ENOSPC from the kernel),
a cache limit smaller than the dataset, a results directory on a read-only mount, a container's
/dev/shm and its memory limit (a real memory cgroup: the kernel's OOM killer).

The mounts need root (CAP_SYS_ADMIN), which CI has: there a failed mount fails the test; elsewhere
it skips, saying why.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from iobench.datasets.manifest import Manifest
from iobench.tiers.base import TierConfigError
from iobench.tiers.s3 import S3Tier
from loaders import ShardLoader
from loaders.storage.shardcache import CacheError, ShardCache
from tests.helpers.cgroups import inside, new_group
from tests.helpers.faultkit import cache_problems, dataset_pairs, stage_copy
from tests.helpers.lab_fixture import ceph_missing
from tests.helpers.mounts import mounted_tmpfs
from tests.helpers.runs import exact_epochs
from tests.helpers.sweepkit import assert_table, sweep_file


def _payload(name: str, size: int) -> bytes:
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _writer(size: int, calls: list[str]):
    def fetch(url: str, f) -> None:
        calls.append(url)
        data = _payload(url, size)
        for i in range(0, size, 64 * 1024):  # chunked like a download, so the disk fills mid-file
            f.write(data[i : i + 64 * 1024])

    return fetch


@pytest.mark.parametrize("size_known", [False, True])
def test_a_full_cache_disk_evicts_and_never_keeps_a_torn_shard(tmp_path, size_known):
    """The cache's limit (10 MB) is above what its disk holds (1 MiB). Of unknown size, a download
    finds the disk full part-way (the kernel's ENOSPC), evicts the least recently used entries and
    starts again; of known size, the cache evicts before it starts (no bytes fetched in vain). A
    shard that cannot fit on the disk at all is a CacheError naming ENOSPC, and leaves nothing."""
    with mounted_tmpfs(tmp_path / "disk", "1m") as disk:
        cache = ShardCache(disk, max_bytes=10_000_000)
        names = [f"s3://b/shard-{i}.tar" for i in range(6)]
        calls: list[str] = []
        for name in names:  # three fit on the disk; each later one needs an eviction
            path = cache.get(name, _writer(300_000, calls), size=300_000 if size_known else None)
            assert Path(path).read_bytes() == _payload(name, 300_000)
        assert cache.stats.misses == 6 and cache.stats.evictions == 3
        # unknown sizes: each of the last three downloads hit ENOSPC once and was fetched again
        assert len(calls) == (6 if size_known else 9)
        assert [cache.contains(n) for n in names] == [False] * 3 + [True] * 3  # least recently used went
        refetched = len(calls) - len(names)
        assert (
            cache_problems(disk, {n: hashlib.sha256(_payload(n, 300_000)).hexdigest() for n in names}) == []
        )

        with pytest.raises(CacheError) as info:
            cache.get("s3://b/huge.tar", _writer(2_000_000, calls), size=2_000_000 if size_known else None)
        assert info.value.errno == errno.ENOSPC and "disk full (ENOSPC)" in str(info.value)
        assert "s3://b/huge.tar" in str(info.value) and not cache.contains("s3://b/huge.tar")
        assert not list(disk.glob(".part-*"))  # the partial download was removed
        print(
            f"figures: 1 MiB cache disk, size {'known' if size_known else 'unknown'}: 6 x 300 kB shards, "
            f"{refetched} downloads cut by ENOSPC and fetched again, 3 evictions, 6 entries verified; "
            "a 2 MB shard: CacheError ENOSPC, nothing left"
        )


def _cached_loader(
    url: str, manifest: Manifest, cache_dir: Path, cache_bytes: int, policy: str = "auto"
) -> ShardLoader:
    tier = S3Tier(url=url)
    urls = tier.shard_urls(manifest)
    return ShardLoader(
        urls,
        workers=0,
        return_batches=True,
        batch_size=16,
        shuffle_buffer=8,
        storage_options=tier.storage_options(),
        cache_dir=str(cache_dir),
        cache_bytes=cache_bytes,
        cache_policy=policy,
        shard_sizes={u: s.bytes for u, s in zip(urls, manifest.shards, strict=True)},
    )


def test_a_dataset_larger_than_the_cache_disk_and_the_cache_limit(lab_env, tiny_dataset, tmp_path):
    """The 34 MB dataset through (a) a 10 MiB cache disk with a 1 GB limit: the disk fills, and
    (b) a 12 MB limit on a roomy disk: the limit binds, under the static policy that auto picks (it
    reads through what it cannot keep) and under lru (it evicts). Every pass delivers exactly the
    dataset, and the caches hold only whole shards, (b) never more than its limit."""
    url = stage_copy(lab_env, tiny_dataset, "cachesize")
    manifest, want = Manifest.load(tiny_dataset), dataset_pairs(tiny_dataset)
    sha = {u: s.sha256 for u, s in zip(S3Tier(url=url).shard_urls(manifest), manifest.shards, strict=True)}
    with mounted_tmpfs(tmp_path / "disk", "10m") as disk:
        loader = _cached_loader(url, manifest, disk, 10**9)
        got = Counter()
        for batch in loader:
            got.update(zip(batch.keys, batch.labels.tolist(), strict=True))
        c, requests = loader.stats.counters.cache, loader.stats.counters.requests
        assert c is not None and requests is not None
        assert got == want and c.evictions > 0 and c.misses == len(manifest.shards)
        assert requests.bytes_transferred == manifest.total_bytes  # room was made before each download
        assert cache_problems(disk, sha) == []

    limit, most, caches = 12_000_000, {}, {}
    for policy in ("auto", "lru"):
        loader = _cached_loader(url, manifest, tmp_path / policy, limit, policy)
        cache = ShardCache(tmp_path / policy, limit)
        got, most[policy] = Counter(), 0
        for batch in loader:
            got.update(zip(batch.keys, batch.labels.tolist(), strict=True))
            most[policy] = max(most[policy], cache.used_bytes())
        caches[policy] = loader.stats.counters.cache
        assert got == want and 0 < most[policy] <= limit, policy
        assert cache_problems(tmp_path / policy, sha) == [], policy
    auto, lru = caches["auto"], caches["lru"]
    assert auto is not None and lru is not None
    assert auto.evictions == 0 and auto.bypassed > 0
    assert lru.evictions > 0 and lru.bypassed == 0
    print(
        f"figures: 34 MB dataset on a 10 MiB cache disk: {c.evictions} evictions, "
        f"{requests.bytes_transferred} bytes fetched for {manifest.total_bytes}, {sum(got.values())} samples "
        f"verified; under a 12 MB limit at most {most} bytes cached, static read through "
        f"{auto.bypassed} shards, lru evicted {lru.evictions}; "
        "0 lost, 0 torn entries"
    )


def _sweep_file(tmp_path: Path, dataset_dir: Path) -> Path:
    cfg = {
        "dataset": {"synth": {"samples": 64, "seed": 1}, "path": str(dataset_dir)},
        "tiers": [{"kind": "local", "name": "disk"}],
        "loaders": [{"kind": "torch", "workers": [0], "batch_size": [16]}],
        "accelerators": [{"kind": "emulated", "type": "h100"}],
        "run": {"min_measure": exact_epochs()},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("where", ["the mount itself", "a new directory on it"])
def test_a_read_only_results_directory_is_refused_before_any_work(iobench, tmp_path, where):
    dataset_dir = tmp_path / "synth"
    config = _sweep_file(tmp_path, dataset_dir)
    with mounted_tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        out = ro if where == "the mount itself" else ro / "run"
        proc = iobench("sweep", config, "--out", out)
        assert os.listdir(ro) == []
    message = " ".join(proc.stderr.split())
    print(f"figures: read-only --out ({where}): exit {proc.returncode}: {message}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr  # the run failed: not a usage error
    assert str(out) in message and "Read-only file system" in message
    assert not dataset_dir.exists()  # refused before the dataset was generated


_SMALL_SHM_EPOCH = """
import json, sys
from iobench.datasets.manifest import Manifest
from loaders import LoaderConfig, make_loader

root, start = sys.argv[1], sys.argv[2]
urls = [str(p) for p in Manifest.load(root).shard_paths(root)]
options = {"multiprocessing_context": start}
config = LoaderConfig(urls=urls, batch_size=64, workers=2, shuffle_buffer=0, options=options)
loader = make_loader("torch", config)
pairs = [[k, y] for batch in loader for k, y in zip(batch.keys, batch.labels.tolist())]
print(json.dumps({"pairs": pairs, "fallback": loader.stats.counters.ring_fallback_batches}))
"""


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_container_sized_dev_shm_runs_the_loader_through_its_ring(tiny_dataset, start):
    """/dev/shm of 64 MiB, as Docker and Kubernetes give by default, in a mount namespace of its own.
    The batch-buffer ring of 2 workers x 6 slots of 64 crops of 224 x 224 (116 MB) lives in a memfd,
    not there: every sample arrives, every batch through the ring. (With the ring in /dev/shm the
    loader stopped at its start: 'unable to allocate shared memory(shm) ... No space left'.)"""
    script = 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$0" -c "$1" "$2" "$3"'
    command = [sys.executable, _SMALL_SHM_EPOCH, str(tiny_dataset), start]
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, *command], capture_output=True, text=True, timeout=180
    )
    if proc.returncode and "mount" in proc.stderr and "Traceback" not in proc.stderr:
        ceph_missing(f"cannot mount a tmpfs on /dev/shm (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert Counter(map(tuple, got["pairs"])) == dataset_pairs(tiny_dataset)
    assert got["fallback"] == 0  # no batch needed torch's own shared memory
    print(f"figures: /dev/shm 64 MiB, {start}: {len(got['pairs'])} samples, every batch through the ring")


def test_a_ram_cache_its_tmpfs_cannot_hold_is_refused_not_measured_smaller(tmp_path, tiny_dataset):
    """memory_cache asks for RAM in /dev/shm; a container's /dev/shm (here an 8 MiB tmpfs) may not
    hold it, and the cache would then evict at ENOSPC: a smaller cache than the one the results
    name. The tier refuses it before any byte moves; one that fits is prepared as usual."""
    manifest = Manifest.load(tiny_dataset)  # 29.5 MiB
    with mounted_tmpfs(tmp_path / "shm", "8m") as shm:
        tier = S3Tier(url="s3://bucket/tiny", memory_cache="1GB")
        tier.cache_dir = str(shm / "iobench-cache-s3-bucket-0")
        with pytest.raises(TierConfigError) as info:
            tier.prepare(manifest, "cold")
        message = str(info.value)
        print(f"figures: memory_cache 1 GB over an 8 MiB tmpfs: {message}")
        assert "needs up to 29.5 MiB" in message and "has 8.00 MiB free of 8.00 MiB" in message
        assert "--shm-size" in message and "set memory_cache smaller" in message
        tier = S3Tier(url="s3://bucket/tiny", memory_cache="4MB")
        tier.cache_dir = str(shm / "iobench-cache-s3-bucket-0")
        assert tier.prepare(manifest, "cold").achieved == "cold"


def test_a_cell_the_oom_killer_ends_is_said_to_be_out_of_memory_and_the_sweep_goes_on(
    iobench_sweep, tmp_path, tiny_dataset
):
    """A container's memory limit: the sweep in a real memory cgroup of 128 MiB, where a cell (torch
    imported: ~170 MB of anonymous memory here) cannot fit beside the sweep (~55 MB). The OOM killer
    ends it with SIGKILL, which leaves no traceback. Before: "the cell exited with status -9",
    "hint: see the traceback in the cell's log", and the log was empty. Now the cell is the one to
    go (its oom_score_adj is raised), the sweep records it, names the OOM killer and the limit."""
    config = sweep_file(tmp_path, tiny_dataset, {"kind": "local", "name": "disk"})
    out = tmp_path / "run"
    limit = str(128 * 2**20)
    with new_group("memory", v1={"memory.limit_in_bytes": limit}, v2={"memory.max": limit}) as group:
        proc = iobench_sweep.run(
            "sweep", config, "--out", out, wrap=lambda argv: inside(group, argv), timeout=300
        )
    summaries = list(out.glob("*/summary.json"))
    assert len(summaries) == 1, f"the sweep itself died: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    error = json.loads(summaries[0].read_text())["error"] or "(none)"
    print(f"figures: a cell in 128 MiB beside the sweep: exit {proc.returncode}; {' '.join(error.split())}")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # a failed cell, not a dead sweep
    assert error.startswith(
        "the cell's process was killed by SIGKILL\nhint: out of memory: the kernel's OOM killer"
    )
    assert "in this memory cgroup" in error and "a memory cgroup limit of 128 MiB" in error
    assert "fewer workers" in error and "docker run --memory" in error
    assert_table(out, {summaries[0].parent.name: "failed"})


def test_a_ram_cache_over_what_the_memory_limit_leaves_is_refused(tmp_path, tiny_dataset, monkeypatch):
    """tmpfs pages count against a container's memory limit: a RAM cache larger than what the limit
    leaves available would end in the OOM killer, so it is refused, naming the limit. (The limit is
    given here; tests/unit/host/test_memory.py reads real ones.)"""
    from iobench.host.memory import Memory
    from iobench.tiers import objectstore

    manifest = Manifest.load(tiny_dataset)  # 29.5 MiB
    tight = Memory(available=16 * 2**20, limit=256 * 2**20, host_total=64 * 2**30)
    monkeypatch.setattr(objectstore, "usable_memory", lambda: tight)
    with mounted_tmpfs(tmp_path / "shm", "64m") as shm:
        tier = S3Tier(url="s3://bucket/tiny", memory_cache="1GB")
        tier.cache_dir = str(shm / "iobench-cache-s3-bucket-0")
        with pytest.raises(TierConfigError) as info:
            tier.prepare(manifest, "cold")
        message = " ".join(str(info.value).split())
        print(f"figures: memory_cache 1 GB in a 256 MiB memory limit: {message}")
        assert (
            "needs up to 29.5 MiB" in message
            and "a memory cgroup limit of 256 MiB (16.0 MiB available" in message
        )
        assert "OOM killer" in message and "docker run --memory" in message
        tier = S3Tier(url="s3://bucket/tiny", memory_cache="8MB")
        tier.cache_dir = str(shm / "iobench-cache-s3-bucket-0")
        assert tier.prepare(manifest, "cold").achieved == "cold"
