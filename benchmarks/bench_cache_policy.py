"""A shard cache smaller than the dataset, in one sweep against no cache and a cache that holds it
all: the static admission policy (auto's choice) and LRU, on the lab's radosgw.

    python benchmarks/bench_cache_policy.py [--samples 1100] [--epochs 3] [--repeats 2]

Runs `iobench sweep` (2 DataLoader workers, 8 MB shards, shuffled epochs, cold and warm starts, S3
behind an emulated link so that fetching binds, as it does for a remote store at scale) and
writes, per tier: samples/s of the last epoch and of the measured window, the fetch stage's thread
CPU per sample, the last epoch's cache hit ratio and the recommend model's prediction of it
(`iobench.recommend.calibrate`), and the goals for a cache of a third of the data (a hit ratio of at least 0.30, fetch CPU and
samples/s no worse than uncached, the model's hit ratio within 5 points).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import yaml
from common import host_line, write_section
from s3env import s3_endpoint

from iobench.host.units import format_bytes, parse_size
from iobench.recommend.calibrate import calibrate, load_cells

UNCACHED, THIRD = "s3", "s3+cache-third"


def _sweep(args: argparse.Namespace, out: Path) -> int:
    tag = uuid.uuid4().hex[:6]
    url = f"s3://policy-{tag}/ds"
    cache = f"/tmp/policy-{tag}"
    third = parse_size(args.dataset) // 3
    # every S3 path behind the same emulated link: on this host a real one is decode-bound, and a
    # cache only shows what it saves where fetching binds (with a cache, misses cross the link)
    s3 = {"kind": "s3", "url": url}
    caches = {
        UNCACHED: {},
        "s3+cache-full": {"cache_dir": f"{cache}/full", "cache_size": "1GB"},
        THIRD: {"cache_dir": f"{cache}/third", "cache_size": f"{third}B"},
        "s3+cache-third-lru": {"cache_dir": f"{cache}/lru", "cache_size": f"{third}B", "cache_policy": "lru"},
    }
    tiers = [{"kind": "local", "name": "local"}] + [
        {
            "kind": "throttled",
            "name": name,
            "bandwidth": args.link,
            "inner": {**s3, **options},
            **({"upload": True} if name == UNCACHED else {}),
        }
        for name, options in caches.items()
    ]
    cfg = {
        "dataset": {"synth": {"samples": args.samples, "seed": 0, "shard_size": "8MB"}},
        "tiers": tiers,
        "loaders": [{"kind": "torch", "workers": [2], "batch_size": [32]}],
        "accelerators": [{"kind": "emulated", "type": "h100", "model": "resnet50", "demand": "training"}],
        "run": {"cache": ["cold", "warm"], "epochs": args.epochs, "repeats": args.repeats, "warmup_steps": 3},
    }
    (out.parent / "sweep.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = [sys.executable, "-m", "iobench.cli", "sweep", str(out.parent / "sweep.yaml"), "--out", str(out)]
    return subprocess.run(cmd).returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1100)  # ~120 MB of ~110 KB JPEGs: 15 shards
    ap.add_argument("--dataset", default="120MB", help="its size, for the cache of a third")
    ap.add_argument("--link", default="30MB/s", help="the emulated link in front of S3")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    out = Path(args.out or Path(tempfile.mkdtemp(prefix="policy-")) / "run")
    out.parent.mkdir(parents=True, exist_ok=True)
    with s3_endpoint():
        code = _sweep(args, out)
    cells = load_cells([out])
    checks = {c.cell.split(" ")[0]: c for c in calibrate(cells).caches}
    by = {(c.tier, "warm" if c.cell_id.endswith("-warm") else "cold"): c for c in cells}
    rows, goals = [], []
    for (tier, start), c in by.items():
        check = checks.get(c.cell_id)
        hit = "-" if c.last_epoch_hit_ratio is None else f"{c.last_epoch_hit_ratio:.2f}"
        predicted = "-" if check is None else f"{check.predicted:.2f} ({c.cache_policy})"
        rows.append(
            f"| {tier} | {start} | {c.samples_per_s:,.0f} | {c.cpu_ms['fetch']:.3f} | {hit} | {predicted} "
            f"| {c.verdict} |"
        )
    for start in ("cold", "warm"):
        third, bare = by.get((THIRD, start)), by.get((UNCACHED, start))
        if third is None or bare is None:
            continue
        check = checks.get(third.cell_id)
        err = None if check is None else 100 * (check.predicted - (third.last_epoch_hit_ratio or 0.0))
        goals.append(
            f"- {start} start: hit ratio {third.last_epoch_hit_ratio or 0:.2f} (≥ 0.30: "
            f"{'met' if (third.last_epoch_hit_ratio or 0) >= 0.30 else 'not met'}); fetch CPU "
            f"{third.cpu_ms['fetch']:.3f} vs {bare.cpu_ms['fetch']:.3f} ms/sample uncached "
            f"({'met' if third.cpu_ms['fetch'] <= bare.cpu_ms['fetch'] else 'not met'}); samples/s "
            f"{third.samples_per_s / bare.samples_per_s:.2f} × uncached "
            f"({'met' if third.samples_per_s >= bare.samples_per_s else 'not met'}); model "
            + ("-" if err is None else f"{err:+.1f} points ({'met' if abs(err) <= 5 else 'not met'})")
        )
    ratios = [
        by[(THIRD, s)].samples_per_s / by[(UNCACHED, s)].samples_per_s
        for s in ("cold", "warm")
        if (THIRD, s) in by and (UNCACHED, s) in by
    ]
    table = "\n".join(rows)
    write_section(
        "cache-policy",
        f"""## A cache smaller than the dataset (`python benchmarks/bench_cache_policy.py`)

{host_line()}. {args.samples} ImageNet-like samples (~{args.dataset}) in 8 MB shards on the lab's radosgw
behind an emulated {args.link} link (the `throttled` tier: with a cache, only misses cross it), the
local disk unthrottled for scale; torch DataLoader with 2 workers, batch 32, shuffled epochs, {args.epochs} epochs per cell, {args.repeats} repeats
(figures: the median repeat), an emulated H100. *s3+cache-third*: a cache of a third of the dataset
({format_bytes(parse_size(args.dataset) // 3)}) under `cache_policy: auto` (static here: the cache
cannot hold the dataset); *-lru*: the same cache under LRU. *samples/s*: the measured window;
*fetch CPU*: the fetch stage's thread CPU per sample over the cell; *hit*: the last epoch's shard-cache
hit ratio; *predicted*: the recommend model's, for the policy the cell's cache used. Cells run one
after another in the sweep's order, not interleaved, so a change of load between cells moves
samples/s (here the unthrottled local cells ran under the heaviest load): the hit ratios and the
fetch CPU hold across such changes, a samples/s ratio near 1 is a tie.

| tier | start | samples/s | fetch CPU ms/sample | hit | predicted | verdict |
|---|---|---:|---:|---:|---:|---|
{table}

Goals for the cache of a third:
{chr(10).join(goals)}

Static vs uncached samples/s, per start: {", ".join(f"{r:.2f}" for r in ratios)} (median
{statistics.median(ratios) if ratios else 0:.2f}).
""",
    )
    print(table)
    print("\n".join(goals))
    sys.exit(code)


if __name__ == "__main__":
    main()
