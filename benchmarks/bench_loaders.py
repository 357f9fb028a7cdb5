"""Our loaders against peer loaders and against the decode ceiling, on one shard set.

    python benchmarks/bench_loaders.py [--samples 3072] [--workers 2,4,8,14] [--rounds 3]

Same shards (local, page cache warm: this measures the loaders, not the disk), the same
RandomResizedCrop + flip output per sample (uint8), the same worker count
and batch size, one full epoch per run from construction to the last batch, interleaved rounds,
medians (ratios: medians of per-round ratios). The ceiling is the single-core decode+augment rate
measured in the same run over half the samples, times
min(workers, cores): what perfect parallelism of this work would give. Beside it, the same work in
that many bare forked processes (no reading, batching or IPC) shows how much of the gap is the
machine's own parallel scaling rather than loader overhead. The DALI loader is judged against DALI's
own decode-only ceiling (its graph over the same JPEGs in memory, the same threads), measured in the
same rounds. 3,072 samples make 22 shards, enough for 14 workers.

``--workers`` sweeps worker counts (2,4,8,14 on a 16-core server), each with its own interleaved
rounds; beside each contender's rate, its CPU per sample against bare decode's at the same count.

Our loaders decode only each sample's crop box (``decode_roi``, their default where the region
decoder is built); the peers, the ceiling and bare decode decode whole images and crop them, as a
map function written for a peer does. A second ceiling, the crop-region decode's own single-core
rate, measures what decoding the box alone saves at the same output, and one contender runs our
threads backend with ``decode_roi=False``.

It checks what it imports before it starts (:data:`EXTRAS`) and says what to install.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import (
    cpu_seconds,
    host_line,
    interleaved,
    loaders_dataset,
    median,
    paired,
    spread,
    warm_jpegs,
    write_section,
)
from peers import (
    SPEC,
    decode_augment,
    litdata_convert,
    litdata_loader,
    spdl_loader,
    webdataset_loader,
)

from loaders import LoaderConfig, make_loader
from loaders.pipeline.cropdecode import decode_crop
from loaders.pipeline.decode import resize_flip
from loaders.pipeline.decoders import REGION_DECODER_MISSING, decoder_name, region_decode_available

# what the contenders import, by the group that installs it: (module, who needs it, what to install)
EXTRAS = {
    "torchdata": [("torchdata.nodes", "the torchdata.nodes backend", "pip install 'iobench[torchdata]'")],
    "dali": [("nvidia.dali", "the DALI backend and DALI's ceiling", "pip install 'iobench[dali]'")],
    "peers": [
        ("webdataset", "the webdataset peer", "pip install 'iobench[peers]'"),
        ("spdl.pipeline", "the SPDL peer", "pip install 'iobench[peers]'"),
        (
            "litdata",
            "the litdata peer",
            "pip install 'iobench[peers]' and pip install --no-deps 'litdata>=0.2' (with its "
            "dependencies litdata would replace your torch)",
        ),
    ],
}


def missing_extras(groups: tuple[str, ...] = tuple(EXTRAS)) -> list[str]:
    """What the contenders of ``groups`` import and this environment lacks: one line each, with
    what to install. A module that is there but fails to import (a dependency of its own missing)
    counts as missing, with the import's error."""
    missing = []
    for group in groups:
        for module, who, install in EXTRAS[group]:
            try:
                importlib.import_module(module)
            except Exception as exc:  # ImportError, or what a half-installed package raises
                missing.append(f"{who} needs {module}: {install} ({type(exc).__name__}: {exc})")
    return missing


def with_cpu(run: Callable[[], float], n: int, into: list[float]) -> Callable[[], float]:
    """``run``, also appending the CPU milliseconds it cost per sample to ``into``."""

    def measured() -> float:
        start = cpu_seconds()
        rate = run()
        into.append((cpu_seconds() - start) / n * 1e3)
        return rate

    return measured


def epoch_rate(make, n: int) -> float:
    t0 = time.perf_counter()
    seen = 0
    for batch in make():
        seen += len(batch.keys) if hasattr(batch, "keys") else len(batch[1])
    elapsed = time.perf_counter() - t0
    if seen != n:
        raise RuntimeError(f"a loader delivered {seen} samples, expected {n}")
    return n / elapsed


def _decode_all(blobs: list[bytes]) -> None:
    import torch

    torch.set_num_threads(1)
    rng = random.Random(0)
    for b in blobs:
        decode_augment(b, rng)


def parallel_rate(blobs: list[bytes], processes: int) -> float:
    """The decode + augment work alone in ``processes`` forked processes, fork to last join."""
    ctx = multiprocessing.get_context("fork")
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_decode_all, args=(blobs[i::processes],)) for i in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise RuntimeError("a bare decode process failed")
    return len(blobs) / (time.perf_counter() - t0)


DALI_CEILING = "DALI's decode-only ceiling (in-memory JPEGs)"


def dali_ceiling_rate(jpegs: list[bytes], workers: int, batch: int) -> float:
    """DALI's own decode-only ceiling: the DALI loader's graph (loaders.backends.dali.graph.augment_graph, CPU) on
    the same JPEGs already in memory, batched as the loader batches them, with the same threads,
    prefetch and iterator; no reading, parsing or feeding. Construction to the last batch, as an
    epoch of the loader is timed."""
    import numpy as np
    from nvidia.dali import Pipeline, fn, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    from loaders.backends.dali.graph import augment_graph
    from loaders.config import AugmentSpec

    arrays = [np.frombuffer(j, dtype=np.uint8) for j in jpegs]
    batches = [arrays[i : i + batch] for i in range(0, len(arrays), batch)]
    t0 = time.perf_counter()
    pipe = Pipeline(
        batch_size=batch,
        num_threads=workers,
        device_id=None,
        seed=0,
        prefetch_queue_depth=2,
        exec_dynamic=True,
    )
    with pipe:
        encoded = fn.external_source(
            source=batches, batch=True, cycle="raise", dtype=types.DALIDataType.UINT8
        )
        pipe.set_outputs(augment_graph(encoded, AugmentSpec(), "cpu", False, 0))
    pipe.build()
    seen = 0
    iterator = DALIGenericIterator(
        [pipe], ["images"], last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=False
    )
    for out in iterator:
        seen += out[0]["images"].shape[0]
    rate = seen / (time.perf_counter() - t0)
    if seen != len(jpegs):
        raise RuntimeError(f"the DALI ceiling decoded {seen} samples, expected {len(jpegs)}")
    del iterator, pipe
    gc.collect()  # see dali_epoch_rate
    return rate


def dali_epoch_rate(make, n: int) -> float:
    """``epoch_rate`` of a DALI loader, its pipeline shut down before the next contender: one left
    for the garbage collector would be collected in a forked DataLoader worker, where DALI's
    shutdown has no threads to join and aborts the worker."""
    rate = epoch_rate(make, n)
    gc.collect()
    return rate


MOSAIC_VENV = Path(
    os.environ.get("IOBENCH_MOSAIC_VENV", Path(__file__).resolve().parent.parent / ".venv-mosaic")
)


class MosaicPeer:
    """mosaicml-streaming, run by benchmarks/mosaic_peer.py in its own environment (it cannot be
    installed beside iobench: see there), from ``.venv-mosaic`` or $IOBENCH_MOSAIC_VENV. Each call is one epoch in a new interpreter; the script
    times the epoch alone and reports its CPU, so start-up and imports count for neither figure."""

    def __init__(self, urls: list[str], mds_dir: Path, workers: int, batch: int) -> None:
        self.python = MOSAIC_VENV / "bin" / "python"
        script = Path(__file__).resolve().parent / "mosaic_peer.py"
        self.command = [
            str(self.python), str(script), "--shards", *urls, "--mds-dir", str(mds_dir),
            "--workers", str(workers), "--batch", str(batch),
        ]  # fmt: skip
        self.cpu_ms: list[float] = []

    def available(self) -> bool:
        return self.python.exists()

    def _run(self, runs: int) -> list[dict]:
        done = subprocess.run([*self.command, "--runs", str(runs)], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"mosaic_peer.py failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def convert(self) -> None:
        self._run(0)  # MDS conversion, outside the timed rounds

    def __call__(self) -> float:
        (result,) = self._run(1)
        self.cpu_ms.append(result["cpu_s"] / result["samples"] * 1e3)
        return result["samples_per_s"]


def worker_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: worker counts, comma-separated, each >= 1 (e.g. 2,4,8,14)"
        )
    return counts


CEILING = "decode ceiling (1-core rate x workers)"
ROI_CEILING = "crop-region decode ceiling (1-core rate x workers)"
BARE = "bare decode in `workers` processes"
OURS = ("iobench torch", "iobench threads", "iobench torchdata")  # the backends that decode on the CPU
PEERS = ("webdataset", "litdata", "mosaicml", "SPDL")


def run_at(
    workers: int, args: argparse.Namespace, urls: list[str], blobs: list[bytes], lit_dir: Path
) -> dict:
    """Every contender at ``workers`` workers, interleaved rounds: samples/s and CPU ms per sample."""
    n = len(blobs)
    cores = len(os.sched_getaffinity(0))
    mosaic = MosaicPeer(
        urls, Path(tempfile.gettempdir()) / f"iobench-mds-{args.samples}", workers, args.batch
    )
    if mosaic.available():
        mosaic.convert()

    def cfg(**kw):
        # no sample shuffle: the peers here do not shuffle either, so all do the same work
        return LoaderConfig(urls=urls, batch_size=args.batch, workers=workers, shuffle_buffer=0, **kw)

    def ceiling(region: bool) -> float:
        import torch

        torch.set_num_threads(1)
        rng = random.Random(0)
        sample = blobs[: n // 2]  # as long as a loader's epoch: a short timing is a noisy one
        t0 = time.perf_counter()
        for b in sample:
            if region:
                resize_flip(decode_crop(b, rng, SPEC), rng, SPEC)
            else:
                decode_augment(b, rng)
        return len(sample) / (time.perf_counter() - t0) * min(workers, cores)

    contenders = {
        CEILING: lambda: ceiling(False),
        ROI_CEILING: lambda: ceiling(True),
        BARE: lambda: parallel_rate(blobs, min(workers, cores)),
        "iobench torch DataLoader": lambda: epoch_rate(lambda: make_loader("torch", cfg()), n),
        # one epoch per loader: the workers' read-ahead into the next epoch is decoded for nothing
        "iobench torch DataLoader, no read-ahead": lambda: epoch_rate(
            lambda: make_loader("torch", cfg(options={"prefetch_next_epoch": False})), n
        ),
        "iobench threads": lambda: epoch_rate(lambda: make_loader("threads", cfg()), n),
        "iobench threads, whole-image decode": lambda: epoch_rate(
            lambda: make_loader("threads", cfg(decode_roi=False)), n
        ),
        "iobench torchdata.nodes (threads)": lambda: epoch_rate(lambda: make_loader("nodes", cfg()), n),
        "iobench DALI (CPU)": lambda: dali_epoch_rate(lambda: make_loader("dali", cfg()), n),
        "iobench DALI (CPU), external feed": lambda: dali_epoch_rate(
            lambda: make_loader("dali", cfg(options={"mode": "external"})), n
        ),
        DALI_CEILING: lambda: dali_ceiling_rate(blobs, workers, args.batch),
        "webdataset WebLoader": lambda: epoch_rate(lambda: webdataset_loader(urls, workers, args.batch), n),
        "litdata StreamingDataLoader": lambda: epoch_rate(
            lambda: litdata_loader(lit_dir, workers, args.batch), n
        ),
        "SPDL pipeline (threads)": lambda: epoch_rate(lambda: spdl_loader(urls, workers, args.batch), n),
    }
    counted = dict.fromkeys((CEILING, ROI_CEILING), n // 2)  # the ceilings decode half the samples
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    timed = {name: with_cpu(run, counted.get(name, n), cpu[name]) for name, run in contenders.items()}
    if mosaic.available():
        timed["mosaicml-streaming (own venv)"] = mosaic
        cpu["mosaicml-streaming (own venv)"] = mosaic.cpu_ms
    results = interleaved(timed, rounds=args.rounds)
    # the warm-up round left out of the CPU figures, as interleaved() leaves it out of the rates
    return {"results": results, "cpu": {name: v[1:] for name, v in cpu.items()}, "mosaic": mosaic.available()}


def section_at(workers: int, run: dict, rounds: int, cores: int) -> str:
    """One worker count's tables and verdicts."""
    results, cpu = run["results"], run["cpu"]
    ceil = results[CEILING]
    peers = [k for k in results if k.startswith(PEERS)]
    # the best peer of each round: ratios are taken within a round, whose contenders ran minutes
    # apart at most, so a slow spell of this shared host moves both sides of a ratio alike
    best_peer = [max(results[k][i] for k in peers) for i in range(rounds)]
    ours_name = max((k for k in results if k.startswith("iobench")), key=lambda k: median(results[k]))
    ours = results[ours_name]
    x_peer = paired(ours, best_peer)
    verdict = (
        f"{'met' if x_peer >= 1.15 else 'not met'} in this run (best, {ours_name}: {x_peer:.2f} × best "
        f"peer, {paired(ours, ceil):.2f} × ceiling, {paired(ours, results[BARE]):.2f} × bare parallel decode)"
    )
    backends = [k for k in results if k.startswith(OURS) and "whole-image" not in k]
    per_backend = "; ".join(
        f"{name.removeprefix('iobench ')}: {paired(results[name], ceil):.2f} × ceiling, CPU "
        f"{paired(cpu[name], cpu[BARE]):.2f} × bare ("
        f"{'met' if paired(results[name], ceil) >= 0.92 and paired(cpu[name], cpu[BARE]) <= 1.0 else 'not met'})"
        for name in backends
    )
    x_region = paired(cpu[ROI_CEILING], cpu[CEILING])
    region = (
        f"{x_region:.2f} × ({median(cpu[ROI_CEILING]):.3f} against {median(cpu[CEILING]):.3f} CPU ms per "
        f"sample, {'met' if x_region <= 0.80 else 'not met'})"
    )
    dali_rows = {
        k: paired(results[k], results[DALI_CEILING]) for k in results if k.startswith("iobench DALI")
    }
    dali_verdict = ", ".join(
        f"{name.removeprefix('iobench ')}: {x:.2f} × ({'met' if x >= 0.8 else 'not met'})"
        for name, x in dali_rows.items()
    )
    rows = "\n".join(
        f"| {name} | {median(v):,.0f} | {spread(v):.0f} % | {paired(v, ceil):.2f} | {paired(v, best_peer):.2f} "
        f"| {median(cpu[name]):.2f} | {paired(cpu[name], cpu[BARE]):.2f} |"
        for name, v in results.items()
    )
    dali_table = "\n".join(
        f"| {name} | {x:.2f} ({min(r):.2f}–{max(r):.2f}) |"
        for name, x in dali_rows.items()
        for r in [[v / c for v, c in zip(results[name], results[DALI_CEILING], strict=True)]]
    )
    crowded = (
        f" on {cores} cores: oversubscribed, the ceiling and bare decode use {cores}"
        if workers > cores
        else ""
    )
    return f"""### {workers} workers{crowded}

| loader | samples/s | spread | × ceiling | × best peer | CPU ms/sample | CPU × bare |
|---|---:|---:|---:|---:|---:|---:|
{rows}

| DALI loader | × DALI's ceiling (per-round ratios: median, min–max) |
|---|---:|
{dali_table}

Goal: decoding the crop box alone (+ resize and flip) ≤ 0.80 × the CPU of the whole decode + crop
(+ the same resize and flip), at the same output — {region}.

Goal: every backend that decodes on the CPU ≥ 0.92 × the decode ceiling at ≤ 1.0 × bare decode's
CPU per sample (both: the whole-image decode's) — {per_backend}.

Goal: the best CPU loader ≥ 1.15 × the best peer — {verdict}.

Goal: DALI on the CPU ≥ 0.8 × DALI's own decode-only ceiling — {dali_verdict}.
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=3072)
    ap.add_argument(
        "--workers",
        type=worker_counts,
        default=[2],
        help="worker counts to sweep, comma-separated (2,4,8,14)",
    )
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="only check that every contender's package imports")
    args = ap.parse_args()
    missing = missing_extras()
    if not region_decode_available():
        missing.append(
            f"the crop-region contenders need the loaders' region decoder: {REGION_DECODER_MISSING}"
        )
    if missing:
        sys.exit("bench_loaders.py cannot run every contender; install first:\n  - " + "\n  - ".join(missing))
    if args.check:
        return

    _, urls = loaders_dataset(args.samples)
    blobs = warm_jpegs(urls)
    cores = len(os.sched_getaffinity(0))
    lit_dir = litdata_convert(urls, Path(tempfile.gettempdir()) / f"iobench-litdata-{args.samples}")
    started = host_line()
    runs = {workers: run_at(workers, args, urls, blobs, lit_dir) for workers in args.workers}
    names = list(next(iter(runs.values()))["results"])
    summary = "\n".join(
        f"| {name} | "
        + " | ".join(
            f"{median(run['cpu'][name]):.2f} ({paired(run['cpu'][name], run['cpu'][BARE]):.2f} ×)"
            for run in runs.values()
        )
        + " |"
        for name in names
    )
    counts = ",".join(str(w) for w in args.workers)
    sections = "\n".join(section_at(w, run, args.rounds, cores) for w, run in runs.items())
    write_section(
        "loaders",
        f"""## Loaders against peers and the decode ceiling (`python benchmarks/bench_loaders.py --workers {counts} --rounds {args.rounds}`)

Started {started}; ended at load {host_line().rsplit("load ", 1)[1]}. {len(blobs)} ImageNet-like JPEGs
(~110 KB) in {len(urls)} tar shards (litdata and mosaicml-streaming: their own formats, converted from
the same samples by `litdata.optimize` and `MDSWriter`; SPDL: a pipeline over our tar reader, having none
of its own), page cache warm, batch {args.batch}, the same RandomResizedCrop + flip output per sample (uint8,
OpenCV's resize): our loaders decode each sample's crop box alone ({decoder_name(True)}; the row
*whole-image decode* with `decode_roi=False`, {decoder_name(False)}), every peer, the ceiling and bare
decode decode whole images and crop them (a map function written for a peer does that), one epoch per run including start-up,
{args.rounds} interleaved rounds per worker count, medians of samples/s; the ratios are medians of the
per-round ratios (a round's contenders ran close together in time). The ceiling is the single-core
decode + augment rate times min(workers, cores), the whole image decoded; *the crop-region ceiling*
the same with the crop box decoded alone. *Bare decode*: the same decode + augment alone in
min(workers, cores) forked processes (no reading, batching or IPC), the parallel scaling this machine
really gives. *CPU ms/sample*: user + system CPU of the benchmark process and of the workers it started
and joined (median over the rounds): what each sample cost in all, start-up, reading, collating and
hand-over included; *CPU × bare*: that against bare decode's, round by round. *DALI's ceiling*: DALI's
own decode-only rate, its graph (decode + RandomResizedCrop, resize, flip on the CPU) over the same
JPEGs in memory with the same threads, batch, prefetch and iterator; DALI's CPU operators are slower
than simplejpeg + OpenCV, so the DALI rows are judged against it. *External feed*: the DALI loader fed
by our own tar reader (`mode="external"`). *No read-ahead*: the DataLoader backend with
`prefetch_next_epoch=False`: every run here reads one epoch and drops its loader, so what the default
loader's workers make of the next epoch (up to `prefetch` batches each, more from a worker that
finished its share first) is decoded for nothing here; in training it is the next epoch's first
batches. SPDL: `spdl.pipeline`, its decode stage on `workers` threads.
{mosaic_line(next(iter(runs.values()))["mosaic"])}

CPU ms per sample (× bare decode's), per worker count:

| loader | {" | ".join(f"{w} workers" for w in runs)} |
|---|{"---:|" * len(runs)}
{summary}

{sections}""",
    )
    print(summary)


def mosaic_line(ran: bool) -> str:
    why = (
        "mosaicml-streaming requires numpy < 2.2 and torchvision (whose PyPI build does not import beside "
        "this CPU torch), so it cannot live beside iobench"
    )
    if not ran:
        return f"{why}; it did not run this time: `bash benchmarks/setup_mosaic_venv.sh` gives it an environment of its own."
    return (
        f"{why}: it ran in its own environment (`bash benchmarks/setup_mosaic_venv.sh`: numpy 2.1, "
        "the same simplejpeg, OpenCV and Pillow) through `benchmarks/mosaic_peer.py`, which imports "
        "`streaming.base` (StreamingDataset, MDSWriter) without the package's `__init__`, the one "
        "place that imports torchvision. One epoch per new interpreter, over its own MDS copy "
        "written by its MDSWriter from the same samples, timed from the construction of the "
        "dataset to the last batch."
    )


if __name__ == "__main__":
    main()
