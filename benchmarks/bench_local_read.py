"""Raw reads of the shard files: fio vs iobench's streaming tar reader (the loaders' fetch stage).

    python benchmarks/bench_local_read.py [DATASET_DIR] [--rounds 5]

Every round makes the shards cold (posix_fadvise DONTNEED, residency measured) before each
contender. fio reads the same files sequentially, buffered like the loader (and direct=1 with
queue depth 16 as the device's ceiling). Without DATASET_DIR a 600 MB synthetic dataset is made
once under ~/.cache/iobench.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import host_line, interleaved, median, spread, timed, write_section

from iobench.datasets.manifest import Manifest
from iobench.host import pagecache
from iobench.host.cachedir import cache_dir
from iobench.host.units import format_bytes
from loaders.sources import ShardSource, SourceSpec
from loaders.tario import iter_samples


def _tar_read(paths: list[str]) -> int:
    """The loaders' fetch stage alone: the shard source's open + the streaming tar reader."""
    source = ShardSource(SourceSpec())
    n = 0
    for p in paths:
        with source.open(p) as f:
            for sample in iter_samples(f, p):
                n += sample.read_bytes
    return n


def _fio(paths: list[str], direct: bool, jobs: int) -> float:
    cmd = [
        "fio",
        "--name=shards",
        "--rw=read",
        "--bs=1M",
        f"--direct={int(direct)}",
        "--ioengine=libaio" if direct else "--ioengine=psync",
        f"--iodepth={16 if direct else 1}",
        f"--numjobs={jobs}",
        "--group_reporting",
        "--output-format=json",
        "--filename=" + ":".join(p.replace(":", "\\:") for p in paths),
    ]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return float(out["jobs"][0]["read"]["bw_bytes"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not shutil.which("fio"):
        raise SystemExit("fio is not installed: apt-get install -y fio")
    if args.dataset:
        root = Path(args.dataset)
    else:
        from iobench.datasets.synth import ensure_dataset

        root = cache_dir() / "datasets" / "bench-local-600MB"
        ensure_dataset(root, size_bytes=600 * 10**6, seed=0, shard_bytes=64 * 10**6)
    manifest = Manifest.load(root)
    paths = [str(p) for p in manifest.shard_paths(root)]
    total = manifest.total_bytes
    residency: list[float] = []

    def cold(fn):
        def run() -> float:
            residency.append(pagecache.evict(paths).fraction)
            return fn()

        return run

    halves = [paths[0::2], paths[1::2]]

    def ours_two_procs() -> float:
        with ProcessPoolExecutor(2) as pool:
            return total / timed(lambda: sum(pool.map(_tar_read, halves)))

    results = interleaved(
        {
            "fio buffered sequential, 1 job (psync, 1 MiB)": cold(lambda: _fio(paths, False, 1)),
            "iobench tar reader, 1 process": cold(lambda: total / timed(lambda: _tar_read(paths))),
            "iobench tar reader, 2 processes": cold(ours_two_procs),
            "fio direct, libaio QD16, 1 MiB (device ceiling)": cold(lambda: _fio(paths, True, 1)),
        },
        rounds=args.rounds,
    )
    base = median(results["fio buffered sequential, 1 job (psync, 1 MiB)"])
    rows = "\n".join(
        f"| {name} | {format_bytes(median(v))}/s | {spread(v):.0f} % | {median(v) / base:.2f} |"
        for name, v in results.items()
    )
    write_section(
        "local-read",
        f"""## Raw shard reads on the local disk (`python benchmarks/bench_local_read.py`)

{host_line()}. {len(paths)} shards, {format_bytes(total)}; every contender starts cold (max residency
after eviction {100 * max(residency):.1f} %); {args.rounds} interleaved rounds, medians. The tar reader
parses headers and copies each member, as the loaders' fetch stage does, without decoding.

| reader | median | spread | × fio buffered |
|---|---:|---:|---:|
{rows}
""",
    )
    print(rows)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
