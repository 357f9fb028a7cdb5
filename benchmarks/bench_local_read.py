"""Raw reads of the shard files: fio vs iobench's streaming tar reader (the loaders' fetch stage).

    python benchmarks/bench_local_read.py [DATASET_DIR] [--rounds 5]

Every round makes the shards cold (posix_fadvise DONTNEED, residency measured) before each
contender. fio reads the same files sequentially, buffered like the loader, twice: one file after
another, as a reader reads its shards, and round-robin, fio's default for a job given several files
(1 MiB from each in turn, so every file's read-ahead is in flight at once); and direct=1 with queue
depth 16 as the device's ceiling. Ratios are medians of the per-round ratios. Without DATASET_DIR a
600 MB synthetic dataset is made once under ~/.cache/iobench.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import host_line, interleaved, median, paired, spread, timed, write_section

from iobench.datasets.manifest import Manifest
from iobench.host import pagecache
from iobench.host.cachedir import cache_dir
from iobench.host.units import format_bytes
from loaders.formats.tar import iter_samples
from loaders.storage.localfile import open_local
from loaders.storage.sources import ShardSource
from loaders.storage.spec import SourceSpec


def _tar_read(paths: list[str]) -> int:
    """The loaders' fetch stage alone: the shard source's open + the streaming tar reader."""
    source = ShardSource(SourceSpec())
    n = 0
    for p in paths:
        with source.open(p) as f:
            for sample in iter_samples(f, p):
                n += sample.read_bytes
    return n


def _copy_alone(paths: list[str], chunk: int = 110_000) -> int:
    """The tar reader's I/O without its parsing: each shard opened as the loaders open it (mapped)
    and copied out in reads of an image's size. What separates the tar reader from this row is
    the CPU of parsing headers and building samples."""
    n = 0
    for p in paths:
        with open_local(p) as f:
            while data := f.read(chunk):
                n += len(data)
    return n


def _fio(paths: list[str], direct: bool, jobs: int, files: str = "sequential") -> float:
    cmd = [
        "fio",
        "--name=shards",
        "--rw=read",
        "--bs=1M",
        f"--direct={int(direct)}",
        "--ioengine=libaio" if direct else "--ioengine=psync",
        f"--iodepth={16 if direct else 1}",
        f"--numjobs={jobs}",
        f"--file_service_type={files}",
        "--group_reporting",
        "--output-format=json",
        "--filename=" + ":".join(p.replace(":", "\\:") for p in paths),
    ]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return float(out["jobs"][0]["read"]["bw_bytes"])


IN_ORDER = "fio buffered, files in order (psync, 1 MiB)"
ROUND_ROBIN = "fio buffered, files round-robin"
OURS = "iobench tar reader, 1 process"
COPY = "mapped copy alone, 110 KB reads (no tar parsing)"


def _shards(dataset: str | None) -> tuple[list[str], int]:
    """The dataset's shard paths and bytes; without one, a 600 MB synthetic set made once."""
    if dataset:
        root = Path(dataset)
    else:
        from iobench.datasets.synth import ensure_dataset

        root = cache_dir() / "datasets" / "bench-local-600MB"
        ensure_dataset(root, size_bytes=600 * 10**6, seed=0, shard_bytes=64 * 10**6)
    manifest = Manifest.load(root)
    return [str(p) for p in manifest.shard_paths(root)], manifest.total_bytes


def _contenders(
    paths: list[str], total: int, residency: list[float], busy: dict[str, list[float]]
) -> dict[str, Callable[[], float]]:
    """Every reader, each started cold (the residency left after eviction goes to ``residency``);
    the in-process readers also note their CPU per wall second in ``busy``."""

    def cold(fn):
        def run() -> float:
            residency.append(pagecache.evict(paths).fraction)
            return fn()

        return run

    halves = [paths[0::2], paths[1::2]]

    def in_process(fn, into: list[float]):
        def run() -> float:
            c0 = time.process_time()
            wall = timed(fn)
            into.append((time.process_time() - c0) / wall)
            return total / wall

        return run

    def ours_two_procs() -> float:
        with ProcessPoolExecutor(2) as pool:
            return total / timed(lambda: sum(pool.map(_tar_read, halves)))

    return {
        IN_ORDER: cold(lambda: _fio(paths, False, 1)),
        ROUND_ROBIN: cold(lambda: _fio(paths, False, 1, "roundrobin")),
        OURS: cold(in_process(lambda: _tar_read(paths), busy["tar"])),
        "iobench tar reader, 2 processes": cold(ours_two_procs),
        COPY: cold(in_process(lambda: _copy_alone(paths), busy["copy"])),
        "fio direct, libaio QD16, 1 MiB (device ceiling)": cold(lambda: _fio(paths, True, 1)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not shutil.which("fio"):
        raise SystemExit("fio is not installed: apt-get install -y fio")
    paths, total = _shards(args.dataset)
    residency: list[float] = []
    busy: dict[str, list[float]] = {"tar": [], "copy": []}  # CPU s of this process per wall s
    results = interleaved(
        _contenders(paths, total, residency, busy),
        rounds=args.rounds,
        shuffle=True,  # a cold read's rate depends on the I/O just before it: no fixed predecessor
    )
    rows = "\n".join(
        f"| {name} | {format_bytes(median(v))}/s | {spread(v):.0f} % | {paired(v, results[IN_ORDER]):.2f} "
        f"| {paired(v, results[ROUND_ROBIN]):.2f} |"
        for name, v in results.items()
    )
    ours, copy = results[OURS], results[COPY]
    x_order, x_rr = paired(ours, results[IN_ORDER]), paired(ours, results[ROUND_ROBIN])
    verdict = (
        f"{x_order:.2f} × fio reading the files in order ({'met' if x_order >= 0.9 else 'not met'}), "
        f"{x_rr:.2f} × fio round-robin ({'met' if x_rr >= 0.9 else 'not met'})"
    )
    write_section(
        "local-read",
        f"""## Raw shard reads on the local disk (`python benchmarks/bench_local_read.py --rounds {args.rounds}`)

{host_line()}. {len(paths)} shards, {format_bytes(total)}; every contender starts cold (max residency
after eviction {100 * max(residency):.1f} %); {args.rounds} interleaved rounds (each in a random order: a cold read's rate moves with
the I/O just before it), medians; ratios are medians of the per-round ratios. The tar reader parses headers and copies each member out of the mapped shard
(`loaders/storage/localfile.py`), as the loaders' fetch stage does, without decoding. fio reads the same
files one after another (as a reader reads its shards), and round-robin, its default for a job
given several files (1 MiB from each in turn: every file's read-ahead in flight at once).

| reader | median | spread | × fio, files in order | × fio, round-robin |
|---|---:|---:|---:|---:|
{rows}

Goal: the tar reader in one process ≥ 0.9 × fio buffered on the same files — {verdict}.
The same mapped reads without the tar parsing: {paired(copy, results[IN_ORDER]):.2f} × fio in order; the tar
reader is {paired(ours, copy):.2f} × that copy, and keeps a core busy {100 * median(busy["tar"]):.0f} % of its time against
the copy's {100 * median(busy["copy"]):.0f} % (median CPU of the process per wall second).
""",
    )
    print(rows)
    print(
        "per-round × fio in order:", [round(a / b, 2) for a, b in zip(ours, results[IN_ORDER], strict=True)]
    )


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
