"""Where a loader's CPU goes, per sample, the training process and the workers apart.

    python benchmarks/bench_loader_cpu.py [--samples 3072] [--workers 2] [--rounds 5] [--step-ms 20]

Each contender is built once and then read epoch after epoch (warm workers, page cache warm): the
steady state of training, start-up left out (bench_loaders.py counts it). Per epoch:

- *consumer*: the main thread's CPU (``time.thread_time``) while the training loop takes the
  epoch's batches: receiving them, turning a batch-ring slot into a tensor, merging the stats,
  counting for resume; with pinning, the pin-memory thread is a thread of the main process, counted
  under *other threads of the training process* (user + system CPU of the process less the main thread);
- *workers*: the CPU of the worker processes (psutil, user + system) or, for the thread backend, of
  the reader threads (the process's CPU less the main thread's), split by the stage clocks the
  workers keep (thread CPU): read/parse (``fetch``: tar headers, the member copied out), decode,
  augment (crop, resize, flip into the batch slot), collate (the slot's buffer, the labels tensor);
  the rest of a worker's CPU is *hand-over and the rest*: the batch pickled and queued, DataLoader's
  worker loop, the stage clocks themselves. Worker processes are read when they have settled (their
  CPU no longer growing) before and after the epoch, so the window holds their read-ahead into the
  next epoch, standing for this epoch's own read-ahead, made during the last one;
- *bare decode + augment*: the same decode + augment of the JPEGs already in memory, alone, in
  ``workers`` forked processes (their user + system CPU, fork to join): the work itself, at the same
  parallelism.

Beside them, each loader again with a training step of pure Python after every batch (``--step-ms``,
holding the GIL but for the interpreter's switch interval): its samples/s against its own without the
step, what a Python-bound training loop costs reader threads that share its GIL, and processes not.

Interleaved rounds, medians (the ratio: median of the per-round ratios).
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable

import psutil
from bench_loaders import parallel_rate
from common import host_line, interleaved, loaders_dataset, median, paired, warm_jpegs, write_section

from loaders import LoaderConfig, ShardLoader, make_loader
from loaders.observe.stages import STAGES

CONSUMER, OTHER, WORKERS, HANDOVER, WHOLE = (
    "consumer (main thread)",
    "other threads of the training process",
    "workers, in all",
    "hand-over and the rest",
    "whole loader",
)
BARE = "bare decode + augment"


def _process_cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _children_cpu() -> float:
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done.ru_utime + done.ru_stime


class SteadyEpochs:
    """One loader, an epoch per call; each call appends its per-sample CPU breakdown (ms) to ``rows``."""

    def __init__(self, backend: str, config: LoaderConfig, step_s: float = 0.0) -> None:
        self.backend = backend
        self.loader = make_loader(backend, config)
        self.step_s = step_s  # a training step of pure Python after each batch: it holds the GIL
        self.threads = backend == "threads"
        self.epoch = 0
        self.rows: list[dict[str, float]] = []

    def _workers(self) -> list[psutil.Process]:
        # this loader's own worker processes (DataLoader's, a private attribute): another loader's,
        # idle or reading ahead, are not this one's cost; none before the first epoch
        loader = self.loader
        batches = loader._loader._iterator if isinstance(loader, ShardLoader) else None
        return [] if batches is None else [psutil.Process(w.pid) for w in getattr(batches, "_workers", [])]

    def __call__(self) -> float:
        loader = self.loader
        loader.set_epoch(self.epoch)
        self.epoch += 1
        workers = self._workers()
        before = _settled(workers)
        stages = {s: loader.stats.cpu_s[s] for s in STAGES}
        samples = loader.stats.samples
        main, process, wall = time.thread_time(), _process_cpu(), time.perf_counter()
        n = 0
        for batch in loader:
            n += len(batch)
            end = time.perf_counter() + self.step_s
            while time.perf_counter() < end:
                pass
        main, process = time.thread_time() - main, _process_cpu() - process
        wall = time.perf_counter() - wall
        # the workers' read-ahead into the next epoch, done: as much as this epoch's own read-ahead,
        # made during the last one, that the window missed
        after = _settled(workers)
        ms = 1e3 / n
        row = {
            s: (loader.stats.cpu_s[s] - stages[s]) * 1e3 / (loader.stats.samples - samples) for s in STAGES
        }
        row[CONSUMER] = main * ms
        if self.threads:
            row[WORKERS], row[OTHER] = (process - main) * ms, 0.0
        else:
            row[WORKERS] = (after - before) * ms
            row[OTHER] = (process - main) * ms
        row[HANDOVER] = row[WORKERS] - sum(row[s] for s in STAGES)
        row[WHOLE] = row[WORKERS] + row[CONSUMER] + row[OTHER]
        self.rows.append(row)
        return n / wall


def _settled(workers: list[psutil.Process]) -> float:
    """The workers' user + system CPU once it stops growing (read at 0.1 s intervals, 2 s at most)."""
    total = sum(sum(w.cpu_times()[:2]) for w in workers)
    for _ in range(20):
        time.sleep(0.1)
        now = sum(sum(w.cpu_times()[:2]) for w in workers)
        if now == total:
            break
        total = now
    return total


def bare_cpu(blobs: list[bytes], workers: int, rows: list[dict[str, float]]) -> Callable[[], float]:
    def run() -> float:
        start = _children_cpu()
        rate = parallel_rate(blobs, workers)
        rows.append({BARE: (_children_cpu() - start) * 1e3 / len(blobs)})
        return rate

    return run


def _cpu_table(contenders: dict[str, SteadyEpochs]) -> str:
    """CPU ms per sample by stage and part of the process, a column per loader (medians of the
    rounds; the warm-up round left out)."""
    lines = [STAGES[0], *STAGES[1:], HANDOVER, WORKERS, CONSUMER, OTHER, WHOLE]
    names = {"fetch": "read/parse (fetch)"}

    def cell(rows: list[dict[str, float]], line: str) -> str:
        value = median([r[line] for r in rows])
        return f"{value:.3f}" if line not in (CONSUMER, OTHER) else f"{value:.4f}"

    return "\n".join(
        f"| {names.get(line, line)} | "
        + " | ".join(cell(c.rows[1:], line) for c in contenders.values())
        + " |"
        for line in lines
    )


def _verdicts(
    contenders: dict[str, SteadyEpochs], rates: dict[str, list[float]], reference: list[float]
) -> str:
    """Each loader against the goals: the whole loader's CPU against bare decode + augment's, and
    the consumer's."""
    ratios = {name: paired([r[WHOLE] for r in c.rows[1:]], reference) for name, c in contenders.items()}
    consumer = {name: median([r[CONSUMER] for r in c.rows[1:]]) for name, c in contenders.items()}
    return "; ".join(
        f"{name}: whole loader {ratios[name]:.3f} × bare "
        f"({'met' if ratios[name] <= 1.08 else 'not met'}), consumer {consumer[name] * 1e3:.1f} µs per sample "
        f"({'met' if consumer[name] <= 0.05 else 'not met'}), {median(rates[name]):,.0f} samples/s"
        for name in contenders
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=3072)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--step-ms", type=float, default=20.0, help="the GIL-holding training step per batch")
    args = ap.parse_args()

    _, urls = loaders_dataset(args.samples)
    blobs = warm_jpegs(urls)
    config = LoaderConfig(urls=urls, batch_size=args.batch, workers=args.workers, shuffle_buffer=0)
    contenders = {
        "torch DataLoader (processes)": SteadyEpochs("torch", config),
        "threads": SteadyEpochs("threads", config),
    }
    step = args.step_ms / 1e3
    stepped = {
        f"{name}, {args.step_ms:g} ms Python step": SteadyEpochs(c.backend, config, step)
        for name, c in contenders.items()
    }
    bare: list[dict[str, float]] = []
    started = host_line()
    runs: dict[str, Callable[[], float]] = {
        **contenders,
        **stepped,
        BARE: bare_cpu(blobs, args.workers, bare),
    }
    rates = interleaved(runs, rounds=args.rounds)
    bare = bare[1:]  # the warm-up round left out, as interleaved() leaves out its rate
    reference = [r[BARE] for r in bare]
    table = _cpu_table(contenders)
    verdicts = _verdicts(contenders, rates, reference)
    stepped_line = "; ".join(
        f"{name.split(',')[0]}: {median(rates[name]):,.0f} "
        f"({paired(rates[name], rates[name.split(',')[0]]):.2f} × without the step)"
        for name in stepped
    )
    write_section(
        "loader-cpu",
        f"""## Where a loader's CPU goes (`python benchmarks/bench_loader_cpu.py --workers {args.workers} --rounds {args.rounds}`)

Started {started}; ended at load {host_line().rsplit("load ", 1)[1]}. {len(blobs)} ImageNet-like
JPEGs in {len(urls)} shards, page cache warm, {args.workers} workers (processes, or reader threads),
batch {args.batch}, no sample shuffle; each loader built once and read epoch after epoch (start-up
left out), {args.rounds} interleaved rounds after a warm-up, medians of CPU ms per sample.
Stages from the workers' own thread-CPU clocks; *workers, in all*: the worker processes' user +
system CPU (psutil), or the reader threads' (the process's less the main thread's); *consumer*: the
training loop's thread; *other threads*: the rest of the training process (DataLoader's pin-memory
thread when pinning: none here, no CUDA). *Bare*: the same decode + augment of the JPEGs in memory
in {args.workers} forked processes, fork to join: {median(reference):.3f} ms per sample.

| ms of CPU per sample | {" | ".join(contenders)} |
|---|{"---:|" * len(contenders)}
{table}

With a training step of pure Python ({args.step_ms:g} ms per batch, holding the GIL but for the
interpreter's switch interval), samples/s: {stepped_line}.

Goals (at 2 workers): the whole loader ≤ 1.08 × bare decode + augment, and the consumer
≤ 0.05 ms per sample — {verdicts}.
""",
    )
    print(table)
    print(verdicts)


if __name__ == "__main__":
    main()
