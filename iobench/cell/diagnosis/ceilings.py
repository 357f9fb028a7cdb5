"""The three ceilings of the differential method (DS-Analyzer, Mohan et al., VLDB 2021).

Each runs one part of the pipeline alone, so that part's best rate is measured, not inferred:

- **accelerator**: the consumer fed one synthetic batch that is already in memory, over and over;
- **prep**: the same loader (kind, workers, batch, decode and augment) over a copy of the dataset
  held in RAM (tmpfs), with nobody consuming: decode, augment, collate and IPC alone;
- **fetch**: the same readers over the tier in the cell's cache state, parsing samples out of the
  shards but decoding nothing: storage (and the client's request path) alone.

The pipeline cannot run faster than the smallest of the three; which one that is names the
binding stage independently of the per-stage timers inside the workers.
"""

from __future__ import annotations

import multiprocessing
import random
import shutil
import time
from bisect import bisect_right
from dataclasses import replace
from itertools import accumulate, islice
from pathlib import Path
from typing import Any

import torch

from iobench.analysis.steady import steady_state
from iobench.cell.diagnosis.ramcopy import RamCopies, ram_budget
from iobench.cell.steps.loaderfactory import epoch_factory, loader_config
from iobench.results.figures import Ceiling
from iobench.results.spec import LoaderSettings, RunSettings
from loaders.config import plan_for
from loaders.formats import index_path
from loaders.pipeline import raw_samples
from loaders.storage import ShardSource, SourceSpec, reads_before_fork

# the prep ceiling needs enough batches per reader for a steady state, not the whole dataset
PREP_BATCHES_PER_READER = 10
PREP_MIN_SECONDS = 3.0
PREP_MAX_EPOCHS = 20


def accelerator_ceiling(
    consumer, batch_size: int, image_size: int = 224, min_seconds: float = 1.0
) -> Ceiling:
    """Steps on one uint8 batch already in memory: at least 5 steps and ``min_seconds`` (max 200)."""
    images = torch.zeros((batch_size, image_size, image_size, 3), dtype=torch.uint8).permute(0, 3, 1, 2)
    labels = torch.zeros(batch_size, dtype=torch.int64)
    for _ in range(2):  # first steps pay for allocator and kernel warm-up
        consumer.step(*consumer.h2d(images, labels)[:2])
    steps, t0 = 0, time.perf_counter()
    while steps < 5 or (time.perf_counter() - t0 < min_seconds and steps < 200):
        x, y, _ = consumer.h2d(images, labels)
        consumer.step(x, y)
        steps += 1
    seconds = time.perf_counter() - t0
    return Ceiling(
        "accelerator",
        steps * batch_size / seconds,
        steps * batch_size,
        seconds,
        method="one synthetic uint8 batch in memory, h2d + step repeated",
    )


def _fetch_reader(items: list, config, objects: bool, limit: int, max_seconds: float, out) -> None:
    try:
        source = ShardSource(config.source)
        samples = raw_samples(
            items, source, config.pipeline, random.Random(config.pipeline.seed), objects=objects
        )
        n = nbytes = 0
        t0 = time.perf_counter()
        for sample in islice(samples, limit):
            n += 1
            nbytes += sample.read_bytes
            if time.perf_counter() - t0 > max_seconds:
                break
        out.put(("ok", n, nbytes, time.perf_counter() - t0))
    except BaseException as exc:  # the parent reports it; a reader must never hang the cell
        out.put(("error", f"{type(exc).__name__}: {exc}", 0, 0.0))


def fetch_ceiling(
    items: list,
    source: SourceSpec,
    loader: LoaderSettings,
    run: RunSettings,
    *,
    samples: int,
    max_seconds: float = 20.0,
) -> Ceiling:
    """``max(1, workers)`` reader processes, split as the loader splits, read and parse ``samples``
    samples between them without decoding (each stops after ``max_seconds``: a huge dataset needs
    no full pass for a rate). Rate: samples over the wall time of the slowest."""
    # no shuffle buffer: it would hold back samples already read, and only yielded ones count
    config = loader_config(items, source, replace(loader, shuffle_buffer=0), run)
    objects = config.layout == "objects"
    readers = loader.readers
    # epoch 0 of one rank, as the loader's plan splits it over its readers
    counts = config.split_counts(readers)
    parts = [list(reader.items) for reader in plan_for(config, config.items(), counts, 0, readers).readers]
    per_reader = -(-samples // readers)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    t0 = time.perf_counter()
    procs = [
        ctx.Process(target=_fetch_reader, args=(p, config, objects, per_reader, max_seconds, out))
        for p in parts
        if p
    ]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    seconds = time.perf_counter() - t0
    failures = [r[1] for r in results if r[0] == "error"]
    if failures:
        raise RuntimeError(f"fetch ceiling: a reader failed: {failures[0]}")
    n = sum(r[1] for r in results)
    nbytes = sum(r[2] for r in results)
    return Ceiling(
        "fetch",
        n / seconds if seconds > 0 else 0.0,
        n,
        seconds,
        bytes_per_s=nbytes / seconds if seconds > 0 else 0.0,
        method=f"{len(procs)} reader process(es) parse samples from the tier without decoding",
    )


def _copy_to_ram(items: list, config, objects: bool, ram: RamCopies) -> list:
    # the cell's own process copies: with a client whose runtime the measured readers, forked
    # later, do not inherit
    source = ShardSource(replace(config.source, client=reads_before_fork(config.source.client)))
    copied: list[tuple[Any, str, Any] | str] = []  # objects' entries with their copy, or shards' copies
    for i, item in enumerate(items):
        url = item[1] if objects else item
        dst, local = ram.create(f"{i:06d}{Path(url).suffix}")
        with dst:
            if objects:
                dst.write(source.read_object(url))
                copied.append((item[0], local, item[2]))
            else:
                with source.open(url) as src:
                    shutil.copyfileobj(src, dst, 4 * 2**20)
                copied.append(local)
                _copy_index(source, url, local, ram)
    source.close()
    return copied


def _copy_index(source: ShardSource, url: str, local: str, ram: RamCopies) -> None:
    """The shard's index beside its copy, where it has one: readers more than shards split each
    shard by the byte ranges its index gives."""
    if not url.endswith(".tar"):
        return
    try:
        index = source.read_object(index_path(url))
    except FileNotFoundError:
        return  # a loader that needs it says so, naming the shard and the command that builds it
    dst, _ = ram.create(Path(index_path(local)).name)
    with dst:
        dst.write(index)


def _prep_subset(sizes: list[tuple[int, int]], readers: int, want: int) -> int:
    """How many leading items to copy: ``want`` samples or more, in a multiple of ``readers`` items
    where there are enough (so no reader idles through another's last shard)."""
    n = samples = 0
    while n < len(sizes) and (samples < want or n < readers or n % readers):
        samples += sizes[n][1]
        n += 1
    return n


def _fitting(sizes: list[tuple[int, int]], n: int, readers: int, budget: int) -> int:
    """The first ``n`` items, or where they do not fit ``budget`` bytes the most leading items that
    do, in a multiple of ``readers`` items and never fewer than ``readers`` (RamCopies refuses those
    that do not fit, saying so). In a container with little memory the ceiling runs more epochs
    over fewer items."""
    ends = list(accumulate(size for size, _ in sizes[:n]))
    if not ends or ends[-1] <= budget:
        return n
    fit = bisect_right(ends, budget)
    return min(n, max(readers, fit - fit % readers))


def prep_ceiling(
    items: list,
    source: SourceSpec,
    loader: LoaderSettings,
    run: RunSettings,
    *,
    sizes: list[tuple[int, int]],
) -> Ceiling:
    """The cell's loader over a RAM copy of enough of the dataset for a steady state.

    ``sizes`` gives (bytes, samples) per item, in the order of ``items``.
    """
    config = loader_config(items, source, loader, run)
    objects = config.layout == "objects"
    readers = loader.readers if not objects else 1
    want = PREP_BATCHES_PER_READER * loader.readers * loader.batch_size
    wanted = _prep_subset(sizes, readers, want)
    budget = ram_budget()
    subset = items[: _fitting(sizes, wanted, readers, budget[0])]
    need = sum(size for size, _ in sizes[: len(subset)])
    smaller = (
        f" ({len(subset)} of the {wanted} it takes for {want:,} samples: what fits the RAM budget; more epochs)"
        if len(subset) < wanted
        else ""
    )
    try:
        ram = RamCopies(need, budget)
    except RuntimeError as exc:
        raise RuntimeError(f"prep ceiling: the copy of the dataset it needs: {exc}") from None
    with ram:
        local = _copy_to_ram(subset, config, objects, ram)
        build = epoch_factory(loader.kind, loader_config(local, SourceSpec(), loader, run))
        arrivals: list[float] = []
        samples: list[int] = []
        t0 = time.perf_counter()
        epochs = 0
        # a short run on a noisy host is mostly start-up and luck: repeat epochs over the copy
        while epochs < PREP_MAX_EPOCHS and (sum(samples) < want or arrivals[-1] - t0 < PREP_MIN_SECONDS):
            for batch in build(epochs):
                if batch.delivers:
                    arrivals.append(time.perf_counter())
                    samples.append(len(batch))
            epochs += 1
        build.close()  # its workers, reading ahead into the next epoch, stop before the next ceiling
        if not arrivals:
            raise RuntimeError("prep ceiling: the loader delivered no batch from the RAM copy of the dataset")
        durations = [b - a for a, b in zip([t0, *arrivals[:-1]], arrivals, strict=True)]
        steady = steady_state(durations)
        d = min(steady.warmup_steps, max(0, len(arrivals) - 2))
        seconds = arrivals[-1] - (arrivals[d - 1] if d > 0 else t0)
        n = sum(samples[d:])
        return Ceiling(
            "prep",
            n / seconds if seconds > 0 else 0.0,
            n,
            seconds,
            method=(
                f"the cell's loader over {len(local)} {'objects' if objects else 'shards'}{smaller} copied to {ram.where}, "
                f"nothing consuming, {epochs} epoch(s); first {d} batch(es) dropped as warm-up ({steady.method})"
            ),
        )
