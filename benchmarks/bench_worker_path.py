"""What a DataLoader worker spends per sample beyond the decode itself, in one process.

    python benchmarks/bench_worker_path.py [--samples 3072] [--rounds 9]

Thread CPU per sample, interleaved rounds, page cache warm, one thread:

- *bare*: decode + augment of the same JPEGs already in memory (bench_loaders' ceiling work);
- *fetch*: the worker's reading alone (``loaders.pipeline.shard_samples.ShardSamples``, the shard
  cursor, over the mapped shards: tar headers parsed and checked, members copied out, samples
  grouped and timed);
- *worker*: a worker's whole path (``loaders.pipeline.reader.raw_samples`` into a
  ``loaders.pipeline.batcher.Batcher`` with ``loaders.pipeline.shmring.SharedBuffers``, as a
  DataLoader worker builds it: the reading, then each sample's decode and augment into its slot of a
  batch-ring buffer, labels, stage clocks, each batch handed over as a slot number), without the
  process boundary.

The worker's extra cost is the geometric mean of the per-round ratios worker / bare, with its 95 %
Student-t interval. For a profiler, ``--loop bare|worker --seconds 30`` runs one of them over and
over; attach with ``perf record -F 2000 -g -p PID`` and read ``perf report --no-children --sort dso``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from common import host_line, interleaved, loaders_dataset, median, ratio_interval, warm_jpegs, write_section
from peers import decode_augment

from loaders import LoaderConfig
from loaders.pipeline.batcher import Batcher
from loaders.pipeline.reader import raw_samples
from loaders.pipeline.shard_samples import ShardSamples
from loaders.pipeline.shmring import SharedBuffers, ShmRing
from loaders.storage.sources import ShardSource
from loaders.storage.spec import SourceSpec


def per_sample_us(run: Callable[[], int]) -> Callable[[], float]:
    def measured() -> float:
        start = time.thread_time()
        n = run()
        return (time.thread_time() - start) / n * 1e6

    return measured


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=3072)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--loop", choices=["bare", "worker"], help="run one path over and over (profiling)")
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds: at least 2 (the interval of the ratio needs two rounds)")

    import torch

    torch.set_num_threads(1)  # as in a worker
    _, urls = loaders_dataset(args.samples)
    blobs = warm_jpegs(urls)
    spec = LoaderConfig(urls=urls, batch_size=64, workers=0, shuffle_buffer=0).pipeline
    source = ShardSource(SourceSpec())
    size = spec.augment.size
    ring = ShmRing(1, 6, spec.batch_size * size * size * 3)

    def bare() -> int:
        rng = random.Random(0)
        for jpg in blobs:
            decode_augment(jpg, rng)
        return len(blobs)

    def fetch() -> int:
        return sum(1 for _ in ShardSamples(urls, source, spec.max_member_bytes, spec.on_error))

    def worker() -> int:
        rng = random.Random(0)
        samples = raw_samples(urls, source, spec, rng)
        n = 0
        for batch in Batcher(
            samples, spec, rng.getrandbits(64), buffers=SharedBuffers(ring, 0), drain=source.drain_into
        ):
            assert batch.images is not None and batch.labels is not None
            slot = ring.slot_of(batch.images)  # what a worker sends: the slot's number and the labels
            batch.labels.tolist()
            n += len(batch)
            if slot is not None:
                ring.release(slot)  # what the consumer's tensor does when it dies
        return n

    if args.loop:
        run = {"bare": bare, "worker": worker}[args.loop]
        print(f"looping {args.loop} for {args.seconds:.0f} s", flush=True)
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            run()
        return

    started = host_line()
    results = interleaved(
        {"bare": per_sample_us(bare), "fetch": per_sample_us(fetch), "worker": per_sample_us(worker)},
        rounds=args.rounds,
    )
    ratio, low, high = ratio_interval(results["worker"], results["bare"])
    extra = [w - b for w, b in zip(results["worker"], results["bare"], strict=True)]
    write_section(
        "worker-path",
        f"""## A worker's CPU beyond the decode (`python benchmarks/bench_worker_path.py --rounds {args.rounds}`)

Started {started}; ended at load {host_line().rsplit("load ", 1)[1]}. {len(blobs)} ImageNet-like
JPEGs in {len(urls)} shards, page cache warm, one process, one thread, {args.rounds} interleaved
rounds; thread CPU µs per sample (medians). *bare*: decode + augment of the JPEGs in memory;
*fetch*: the worker's tar reading alone; *worker*: a DataLoader worker's whole path (reading,
decode and augment into a batch-ring slot, labels, stage clocks, batches handed over as slot
numbers), without the process boundary.

| path | µs per sample |
|---|---:|
| bare decode + augment | {median(results["bare"]):,.0f} |
| fetch (tar reading) alone | {median(results["fetch"]):,.1f} |
| worker path | {median(results["worker"]):,.0f} |

The worker path costs **{100 * (ratio - 1):+.1f} %** of the bare decode's CPU per sample (95 %
interval {100 * (low - 1):+.1f} to {100 * (high - 1):+.1f} %; {median(extra):.0f} µs per sample,
per-round differences {min(extra):.0f} to {max(extra):.0f}).
""",
    )
    print(f"worker / bare {ratio:.3f} [{low:.3f}, {high:.3f}], extra {median(extra):.0f} us/sample")


if __name__ == "__main__":
    main()
