"""Workers across epochs: each start method with persistent workers that start the next epoch early
(the default), against persistent workers that wait to be asked for it and workers forked anew every
epoch (what the torch loader did before its workers persisted).

    python benchmarks/bench_epochs.py [--samples 3072] [--workers 2] [--epochs 3] [--rounds 3]

Per contender: a ShardLoader over the benchmark's synthetic shards (page cache warm), ``epochs``
epochs through a consumer that spends ``--step-ms`` per batch (an accelerator's step), and per run:
samples/s over the epochs after the first, the time to the first batch, the mean wait of the first
step of each later epoch (the epoch boundary) against the median step wait, and how many batches
missed the batch-buffer ring (``ring_fallback_batches``: 0 means every batch went through it).
Contenders run in rotating order within each round; figures are medians over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import host_line, loaders_dataset, median, write_section

from iobench.datasets.manifest import Manifest
from iobench.host import pagecache
from loaders import ShardLoader


def run(urls: list[str], counts: dict[str, int], method: str, mode: str, args) -> dict:
    created = time.perf_counter()
    loader = ShardLoader(
        urls,
        batch_size=args.batch,
        workers=args.workers,
        prefetch=2,
        shuffle_buffer=512,
        shard_samples=counts,
        rank=0,
        world_size=1,
        multiprocessing_context=method,
        persistent_workers=mode != "per-epoch",
        prefetch_next_epoch=mode == "ahead",  # the default
    )
    waits: list[tuple[int, float]] = []
    first = None
    later_samples, later_start = 0, None
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        batches = iter(loader)
        if epoch == 1:
            later_start = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            try:
                images, _ = next(batches)
            except StopIteration:
                break
            now = time.perf_counter()
            first = first if first is not None else now - created
            waits.append((epoch, now - t0))
            if epoch >= 1:
                later_samples += len(images)
            time.sleep(args.step_ms / 1000)
    wall = time.perf_counter() - later_start  # type: ignore[operator]
    fallback = loader.stats.counters.ring_fallback_batches
    loader.close()
    boundary = [next(w for e, w in waits if e == epoch) for epoch in range(1, args.epochs)]
    return {
        "samples_per_s": later_samples / wall,
        "first_batch_s": first,
        "boundary_ms": 1000 * statistics.mean(boundary),
        "median_wait_ms": 1000 * statistics.median(w for _, w in waits),
        "fallback": fallback,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=3072)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--step-ms", type=float, default=20.0)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = ap.parse_args()

    root, urls = loaders_dataset(args.samples)
    manifest = Manifest.load(root)
    counts = {u: s.samples for u, s in zip(urls, manifest.shards, strict=True)}
    pagecache.warm(urls)
    contenders = {
        ("fork", "per-epoch"): "fork, workers forked every epoch (before)",
        ("fork", "persistent"): "fork, persistent, next epoch when asked (prefetch_next_epoch=False)",
        ("fork", "ahead"): "fork, persistent, next epoch started early (default)",
        ("forkserver", "ahead"): "forkserver, default",
        ("spawn", "ahead"): "spawn, default",
    }
    results: dict = {key: [] for key in contenders}
    keys = list(contenders)
    for r in range(args.rounds + 1):  # round 0 warms up
        for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
            out = run(urls, counts, key[0], key[1], args)
            if r:
                results[key].append(out)
    lines = [
        f"{host_line()}; {args.samples} JPEGs (~110 KB) in {len(urls)} shards, page cache warm, "
        f"{args.workers} workers, batch {args.batch}, a {args.step_ms:.0f} ms step per batch, {args.epochs} epochs "
        f"per run, {args.rounds} interleaved rounds, medians.",
        "",
        "| workers | samples/s (epochs 2+) | first batch (s) | epoch boundary wait (ms) | median step wait (ms) | × median | batches past the ring |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, name in contenders.items():
        runs = results[key]

        def m(field: str, runs=runs) -> float:
            return median([x[field] for x in runs])

        ratio = median(
            [x["boundary_ms"] / x["median_wait_ms"] for x in runs if x["median_wait_ms"] > 0] or [0.0]
        )
        lines.append(
            f"| {name} | {m('samples_per_s'):,.0f} | {m('first_batch_s'):.2f} | {m('boundary_ms'):.0f} "
            f"| {m('median_wait_ms'):.0f} | {ratio:.1f} | {int(max(x['fallback'] for x in runs))} |"
        )
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section(
            "epochs",
            "## Workers across epochs, every start method (`python benchmarks/bench_epochs.py`)\n\n" + body,
        )


if __name__ == "__main__":
    main()
