"""Every access path through the loaders' own fetch stage alone (tar parsing, no decode): what a
tier costs our code, against the local disk and each other.

    python benchmarks/bench_tier_paths.py [--samples 1100] [--rounds 5] [--readers 2]

Paths: the local disk, S3 (the lab's radosgw) uncached, S3 with a warm shard cache that holds the
dataset, S3 with a warm cache of a third of it (auto: static), RADOS with a warm RAM cache
(tmpfs), and CephFS (ceph-fuse). Each round prepares every path warm and reads the whole dataset
through the differential method's fetch-only readers (`iobench.cell.diagnosis.ceilings.fetch_ceiling`,
the same readers and split as the loader); rounds interleave the paths in a rotating order.
Starts a lab with CephFS (or uses CEPH_CONF/AWS_ENDPOINT_URL with --cephfs-mount).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench_tier_matrix import lab_with_cephfs
from common import host_line, interleaved, median, paired, spread, write_section

from iobench.cell.diagnosis.ceilings import fetch_ceiling
from iobench.cell.inputs import loader_inputs
from iobench.datasets.synth import ensure_dataset
from iobench.host.units import format_bytes
from iobench.results.spec import LoaderSettings, RunSettings
from iobench.tiers import make_tier
from iobench.tiers.ramcache import release

LOCAL = "local disk (page cache warm)"
UNCACHED = "S3 uncached"
FULL = "S3 + warm cache, holds the dataset"
THIRD = "S3 + warm cache of a third (static)"
RAM = "RADOS + warm RAM cache"
CEPHFS = "CephFS (ceph-fuse)"


def _tiers(dataset: Path, mount: str | None, scratch: Path, total: int) -> dict[str, dict[str, Any]]:
    tag = uuid.uuid4().hex[:6]
    s3 = {"kind": "s3", "url": f"s3://paths-{tag}/ds"}
    specs: dict[str, dict[str, Any]] = {
        LOCAL: {"kind": "local", "path": str(dataset)},
        UNCACHED: {**s3, "upload": True},
        FULL: {**s3, "cache_dir": str(scratch / "full"), "cache_size": 4 * total},
        THIRD: {**s3, "cache_dir": str(scratch / "third"), "cache_size": total // 3},
        RAM: {"kind": "rados", "url": f"rados://paths-{tag}/ds", "memory_cache": 2 * total, "upload": True},
    }
    if mount:
        specs[CEPHFS] = {"kind": "cephfs", "path": f"{mount}/paths-{tag}", "upload": True}
    return specs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1100)  # ~120 MB of ~110 KB JPEGs
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--cephfs-mount")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="paths-"))
    dataset = scratch / "dataset"
    shard_bytes = ensure_dataset(dataset, samples=args.samples, seed=0, shard_bytes=8 * 10**6).total_bytes
    loader = LoaderSettings(kind="torch", workers=args.readers, batch_size=32)
    run = RunSettings()
    with lab_with_cephfs(args.cephfs_mount) as mount:
        tiers, inputs = {}, {}
        for name, spec in _tiers(dataset, mount, scratch, shard_bytes).items():
            tier = make_tier(spec)
            if spec.get("upload"):
                tier.upload_dataset(str(dataset))
            tiers[name] = tier
            inputs[name] = loader_inputs(tier, tier.load_manifest(), loader)
        total_samples = tiers[LOCAL].load_manifest().num_samples
        total_bytes = tiers[LOCAL].load_manifest().total_bytes

        def path(name: str):
            def read() -> float:
                tier = tiers[name]
                tier.prepare(tier.load_manifest(), "warm")
                items, source = inputs[name]
                rate = fetch_ceiling(items, source, loader, run, samples=total_samples).bytes_per_s
                assert rate is not None  # a fetch ceiling counts the bytes it read
                return rate

            return read

        try:
            results = interleaved({name: path(name) for name in tiers}, rounds=args.rounds)
        finally:
            ram = tiers[RAM].client_cache()
            if ram is not None:
                release(ram[0])  # tmpfs is RAM: give it back
    shutil.rmtree(scratch, ignore_errors=True)

    def x(a: str, b: str) -> float:
        return paired(results[a], results[b])

    rows = "\n".join(
        f"| {name} | {format_bytes(median(v))}/s | {spread(v):.0f} % | {x(name, LOCAL):.2f} | {x(name, UNCACHED):.2f} |"
        for name, v in results.items()
    )
    goals = [
        (f"warm full cache ≥ 0.95 × local: {x(FULL, LOCAL):.2f}", x(FULL, LOCAL) >= 0.95),
        (f"undersized cache ≥ 1.0 × uncached: {x(THIRD, UNCACHED):.2f}", x(THIRD, UNCACHED) >= 1.0),
        (f"RAM-cached RADOS ≥ 0.95 × local: {x(RAM, LOCAL):.2f}", x(RAM, LOCAL) >= 0.95),
    ]
    goal_lines = "\n".join(f"- {text} — {'met' if ok else 'not met'}" for text, ok in goals)
    write_section(
        "tier-paths",
        f"""## Every access path through the fetch stage alone (`python benchmarks/bench_tier_paths.py`)

{host_line()}. {total_samples} ImageNet-like samples ({format_bytes(total_bytes)}) in 8 MB shards;
{args.readers} fetch-only reader process(es) (the loaders' readers and split, tar parsing, no decode)
read the whole dataset per path and round, every path prepared warm first; the lab's Ceph 16 on
127.0.0.1 (radosgw, librados, ceph-fuse); {args.rounds} interleaved rounds, medians of bytes/s;
ratios are medians of the per-round ratios.

| path | bytes/s | spread | × local | × S3 uncached |
|---|---:|---:|---:|---:|
{rows}

Goals:
{goal_lines}
""",
    )
    print(rows)
    print(goal_lines)


if __name__ == "__main__":
    main()
