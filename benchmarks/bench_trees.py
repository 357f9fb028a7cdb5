"""One loader backend from two source trees, interleaved in the same environment: what a change
of the loaders cost or saved per sample.

    git worktree add /tmp/old-tree <rev>
    python benchmarks/bench_trees.py --old /tmp/old-tree --backends threads,nodes [--rounds 5]

Each run is one epoch of the loader benchmarks' shard set (bench_loaders.py's, page cache warm) in a
new interpreter whose ``loaders`` is the tree's, after one loader was built and dropped there (the
imports count for neither side), timed from the construction of the loader to its last batch:
samples/s, and CPU ms per sample (user + system, the process and the workers it joined). Runs go
round robin, a rotating order per round; the ratios are medians of per-round ratios. ``--new-set``
gives the new tree's loaders extra settings (``decode_roi=false`` compares the same decode).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common import REPO, host_line, interleaved, loaders_dataset, median, paired, warm_jpegs

EPOCH = """
import json, resource, sys, time
tree, backend, workers, extra, urls = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]), sys.argv[5:]
sys.path.insert(0, tree)
import loaders
from loaders import LoaderConfig, make_loader
assert loaders.__file__.startswith(tree), loaders.__file__
def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
def config():
    return LoaderConfig(urls=urls, batch_size=64, workers=workers, shuffle_buffer=0, **extra)
make_loader(backend, config())
c0, t0, n = cpu(), time.perf_counter(), 0
for batch in make_loader(backend, config()):
    n += len(batch.keys)
wall = time.perf_counter() - t0
print(json.dumps({"n": n, "cpu_ms": (cpu() - c0) / n * 1e3, "rate": n / wall}))
"""


def epoch(tree: Path, backend: str, workers: int, extra: dict, urls: list[str], cpu: list[float]):
    def run() -> float:
        args = [sys.executable, "-c", EPOCH, str(tree), backend, str(workers), json.dumps(extra), *urls]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{tree} {backend}: {done.stderr[-2000:]}")
        figures = json.loads(done.stdout.splitlines()[-1])
        cpu.append(figures["cpu_ms"])
        return figures["rate"]

    return run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", type=Path, required=True, help="the other tree (a git worktree)")
    ap.add_argument("--backends", default="threads,nodes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--samples", type=int, default=3072)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--new-set", default="{}", help='settings for the new tree only, as JSON: {"decode_roi": false}'
    )
    args = ap.parse_args()
    _, urls = loaders_dataset(args.samples)
    warm_jpegs(urls)
    trees = {"old": args.old.resolve(), "new": REPO}
    extra = {"old": {}, "new": json.loads(args.new_set)}
    cpu: dict[str, list[float]] = {}
    contenders = {}
    for backend in args.backends.split(","):
        for side, tree in trees.items():
            name = f"{side} {backend}"
            cpu[name] = []
            contenders[name] = epoch(tree, backend, args.workers, extra[side], urls, cpu[name])
    started = host_line()
    rates = interleaved(contenders, rounds=args.rounds)
    print(f"started {started}; ended {host_line()}; old: {trees['old']}, new settings: {extra['new']}")
    for backend in args.backends.split(","):
        old, new = f"old {backend}", f"new {backend}"
        cpu_old, cpu_new = cpu[old][1:], cpu[new][1:]  # the warm-up round left out, as of the rates
        print(
            f"{backend}: old {median(rates[old]):,.0f}/s {median(cpu_old):.3f} ms, new {median(rates[new]):,.0f}/s "
            f"{median(cpu_new):.3f} ms; new/old rate {paired(rates[new], rates[old]):.3f}, "
            f"CPU {paired(cpu_new, cpu_old):.3f}"
        )


if __name__ == "__main__":
    main()
