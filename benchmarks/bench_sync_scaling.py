"""Does a one-rank cell predict its synchronous 2-, 3- and 4-rank twins? (docs/scale-out.md)

One sweep per round over a tier whose latency has a tail (a throttled local tier: lognormal request
latency, median 5 ms, p99 150 ms, one request per object), one object per sample, no loader
workers (the prediction's assumption: a rank's loader does not fill a queue while it waits for its
peers), an emulated accelerator of 200 samples/s per rank, ``run.ranks_per_node: [1, 2, 3, 4]`` in
step (``sync: allreduce``). Each round: every multi-rank cell's measured synchronous AU against the
AU its one-rank twin predicted for its world size. Rounds are medianed; the errors of every round
are written too.

    python benchmarks/bench_sync_scaling.py --rounds 3 [--write]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from common import host_line, write_section

from iobench.analysis.scale import checks
from iobench.results.api import load_summaries

SECTION = "sync-scaling"


def _dataset(base: Path) -> Path:
    from iobench.datasets.objects import explode
    from iobench.datasets.synth import synthesize

    out = base / "ds"
    synthesize(out, samples=1024, seed=11, shard_bytes=1_000_000)
    explode(out)
    return out


def _round(base: Path, dataset: Path, i: int) -> list:
    config = {
        "dataset": {"path": str(dataset)},
        "tiers": [
            {
                "kind": "throttled",
                "name": "tail",
                "inner": {"kind": "local", "path": str(dataset)},
                "latency_ms": 5,
                "latency_p99_ms": 150,
            }
        ],
        "loaders": [
            {"kind": "torch", "workers": [0], "batch_size": [8], "shuffle_buffer": 8, "layout": "objects"}
        ],
        "accelerators": [{"kind": "emulated", "type": "custom", "samples_per_s": 200}],
        "run": {"ranks_per_node": [1, 2, 3, 4], "warmup_steps": 2, "epochs": 3, "cache": "warm", "seed": i},
    }
    path = base / f"round{i}.yaml"
    path.write_text(yaml.safe_dump(config))
    out = base / f"round{i}"
    subprocess.run(
        [sys.executable, "-m", "iobench.cli", "sweep", str(path), "--out", str(out), "--no-progress"],
        check=True,
        capture_output=True,
    )
    return checks(load_summaries(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--write", action="store_true", help="replace this benchmark's section of docs/benchmarks.md"
    )
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="iobench-sync-") as tmp:
        base = Path(tmp)
        dataset = _dataset(base)
        rounds = [_round(base, dataset, i) for i in range(args.rounds)]
    by_w: dict[int, list] = {}
    for found in rounds:
        for c in found:
            by_w.setdefault(c.world_size, []).append(c)
    lines = [
        "## Synchronous scaling: predicted from one rank, measured at 2 to 4",
        "",
        host_line(),
        "",
        f"`python benchmarks/bench_sync_scaling.py --rounds {args.rounds}`: a throttled local tier with a "
        "latency tail (lognormal, median 5 ms, p99 150 ms per object), one object per sample, no loader "
        "workers, batch 8, an emulated accelerator of 200 samples/s per rank, 3 epochs of 1,024 samples, "
        "`sync: allreduce` on `ib-ndr-400` (ResNet-50's all-reduce is fully hidden at this compute). "
        "Each round predicts the 2-, 3- and 4-rank cells from its one-rank cell.",
        "",
        "| ranks | measured AU (median) | predicted AU (median) | error, median | error, every round |",
        "|---:|---:|---:|---:|---|",
    ]
    for w in sorted(by_w):
        cs = by_w[w]
        lines.append(
            f"| {w} | {statistics.median(c.measured_au for c in cs):.3f} | "
            f"{statistics.median(c.predicted_au for c in cs):.3f} | "
            f"{100 * statistics.median(c.error for c in cs):+.1f} % | "
            + ", ".join(f"{100 * c.error:+.1f} %" for c in cs)
            + " |"
        )
    text = "\n".join(lines)
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
