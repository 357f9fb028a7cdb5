"""One dataset on every access path and in both layouts: local disk, S3 (Ceph RGW) direct and with
an NVMe shard cache, RADOS direct and with a RAM shard cache ("Ceph + memory cache"), CephFS —
tar shards and one object per sample. Runs `iobench sweep` and writes the verdicts per tier.

    python benchmarks/bench_tier_matrix.py [--samples 1536] [--epochs 2]

Starts a lab with CephFS (or uses the one in CEPH_CONF/AWS_ENDPOINT_URL plus --cephfs-mount).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml
from common import host_line, write_section

from iobench.host.units import format_bytes


@contextlib.contextmanager
def lab_with_cephfs(mount: str | None):
    if os.environ.get("CEPH_CONF") and os.environ.get("AWS_ENDPOINT_URL") and mount:
        yield mount
        return
    from iobench.lab import down, up

    lab_dir = os.path.join(tempfile.mkdtemp(prefix="ibm-", dir="/tmp"), "lab")
    lab = up(
        lab_dir, port=27481, mon_ports=(23301, 26790), with_mgr=False, memstore_bytes=6 << 30, cephfs=True
    )
    saved = dict(os.environ)
    os.environ.update(lab.env)
    try:
        yield lab.mount
    finally:
        os.environ.clear()
        os.environ.update(saved)
        down(lab.dir, purge=True)


def _tiers(tag: str, mount: str | None) -> list[dict[str, Any]]:
    """Every access path over this run's own bucket, pool and directory (``tag``); CephFS where mounted."""
    tiers: list[dict[str, Any]] = [
        {"kind": "local", "name": "local-disk"},
        {"kind": "s3", "name": "rgw", "url": f"s3://matrix-{tag}/ds", "upload": True},
        {
            "kind": "s3",
            "name": "rgw+nvme-cache",
            "url": f"s3://matrix-{tag}/ds",
            "cache_dir": f"/tmp/matrix-{tag}/nvme",
            "cache_size": "4GB",
        },
        {"kind": "rados", "name": "rados", "url": f"rados://matrix-{tag}/ds", "upload": True},
        {
            "kind": "rados",
            "name": "rados+ram-cache",
            "url": f"rados://matrix-{tag}/ds",
            "memory_cache": "2GB",
        },
    ]
    if mount:
        tiers.append({"kind": "cephfs", "name": "cephfs", "path": f"{mount}/matrix-{tag}", "upload": True})
    return tiers


def _config(args: argparse.Namespace, tiers: list[dict]) -> dict:
    """The sweep: every tier in both layouts, the torch loader, an emulated H100, cold start."""
    return {
        "dataset": {"synth": {"samples": args.samples, "seed": 0, "shard_size": "16MB"}},
        "tiers": tiers,
        "loaders": [
            {
                "kind": "torch",
                "workers": [args.workers],
                "batch_size": [64],
                "shuffle_buffer": 256,
                "layout": layout,
            }
            for layout in ("shards", "objects")
        ],
        "accelerators": [{"kind": "emulated", "type": "h100", "model": "resnet50", "demand": "training"}],
        "run": {"cache": ["cold"], "epochs": args.epochs, "warmup_steps": 3},
    }


def _row(r: dict) -> str:
    """One cell of results.parquet as a table row."""
    layout = "objects" if "-objects-" in r["cell_id"] else "shards"
    hit = r["last_epoch_cache_hit_ratio"]
    return (
        f"| {r['tier']} | {layout} | {r['status']} | {r['first_epoch_samples_per_s'] or 0:,.0f} "
        f"| {r['last_epoch_samples_per_s'] or 0:,.0f} | {format_bytes(r['bytes_per_s'] or 0)}/s "
        f"| {r['requests'] or 0:,} | {r['request_p99_ms'] or 0:.1f} | {'-' if hit is None else f'{100 * hit:.0f} %'} "
        f"| {r['verdict']}{' (' + r['binding_stage'] + ')' if r['binding_stage'] else ''} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1536)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cephfs-mount")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tag = uuid.uuid4().hex[:6]
    with lab_with_cephfs(args.cephfs_mount) as mount:
        work = Path(tempfile.mkdtemp(prefix="matrix-"))
        (work / "sweep.yaml").write_text(yaml.safe_dump(_config(args, _tiers(tag, mount)), sort_keys=False))
        out = Path(args.out or work / "run")
        proc = subprocess.run(
            [sys.executable, "-m", "iobench.cli", "sweep", str(work / "sweep.yaml"), "--out", str(out)]
        )
    table = "\n".join(_row(r) for r in pq.read_table(out / "results.parquet").to_pylist())
    write_section(
        "tier-matrix",
        f"""## One dataset on every tier and layout (`python benchmarks/bench_tier_matrix.py`)

{host_line()}. {args.samples} ImageNet-like samples (synthetic, ~110 KB JPEGs), the lab's Ceph 16
(memstore OSD, radosgw, CephFS via ceph-fuse) on 127.0.0.1, {args.workers} DataLoader workers, batch 64,
an emulated H100 (ResNet-50, 7,000 samples/s), {args.epochs} epochs per cell, cold start. *Requests*: GETs
or librados reads over the whole cell; *p99*: their latency; *hit*: shard-cache hit ratio in the
last epoch. Everything shares 2 cores, so on this machine every path is CPU-bound on JPEG decode
unless a path's per-request cost shows through; the figures rank client overheads, not clusters.
Per-sample objects bypass the shard cache, so a cached tier's `objects` row reads like the uncached one.

| tier | layout | status | epoch 1 samples/s | last epoch samples/s | read/s | requests | p99 ms | hit | verdict |
|---|---|---|---:|---:|---:|---:|---:|---:|---|
{table}
""",
    )
    print(table)
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
