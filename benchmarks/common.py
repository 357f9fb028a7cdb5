"""Shared benchmark plumbing: interleaved repeats, medians, ratios, and docs/benchmarks.md sections.

These machines are noisy, so every figure is the median of several interleaved rounds (each round
runs every contender once, so background load hits them alike) and comparisons are ratios
measured in the same run.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import re
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")  # what a contender returns: its figure (a rate, or a tuple of them)
REPO = Path(__file__).resolve().parent.parent
# a smoke run (tests/e2e/test_benchmarks_run.py) writes its section elsewhere: docs hold measurements only
DOC = Path(os.environ.get("BENCHMARKS_DOC", REPO / "docs" / "benchmarks.md"))
# run as a script (``python benchmarks/bench_x.py``), a benchmark would import iobench and loaders
# from wherever the environment's editable install points, which may be another checkout: every
# benchmark imports this module first, so the code measured is the code of this checkout
if str(REPO) not in sys.path:
    sys.path.insert(1, str(REPO))


def interleaved(
    contenders: dict[str, Callable[[], T]], rounds: int, warmup: int = 1, shuffle: bool = False
) -> dict[str, list[T]]:
    """Run each contender once per round, in a rotating order; each returns its own figure.

    A rotation keeps every contender behind the same predecessor in most rounds; where what one
    leaves behind moves the next (cold reads after another reader's I/O), ``shuffle`` draws each
    round's order at random instead (seeded: a rerun repeats it)."""
    import random

    names = list(contenders)
    results: dict[str, list[T]] = {n: [] for n in names}
    draw = random.Random(0)
    for r in range(warmup + rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        if shuffle:
            draw.shuffle(order)
        for name in order:
            value = contenders[name]()
            if r >= warmup:
                results[name].append(value)
    return results


def median(values: list[float]) -> float:
    return statistics.median(values)


def paired(values: list[float], reference: list[float]) -> float:
    """The median of the per-round ratios value / reference (both from the same rounds)."""
    return statistics.median(v / r for v, r in zip(values, reference, strict=True))


def ratio_interval(
    values: list[float], reference: list[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """The geometric mean of the per-round ratios value / reference and its Student-t interval
    (taken on the log-ratios, so a ratio and its inverse get the same interval): (ratio, low, high)."""
    from iobench.analysis.repeats import t_quantile

    logs = [math.log(v / r) for v, r in zip(values, reference, strict=True)]
    mean = statistics.fmean(logs)
    half = t_quantile(confidence, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def spread(values: list[float]) -> float:
    """(max - min) / median, in percent."""
    m = statistics.median(values)
    return 100.0 * (max(values) - min(values)) / m if m else 0.0


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended and been waited for (DataLoader
    workers are joined at the end of their epoch)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def host_line() -> str:
    load = os.getloadavg()
    return (
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load {load[0]:.1f}/{load[1]:.1f}"
    )


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section between this benchmark's markers in docs/benchmarks.md."""
    DOC.parent.mkdir(parents=True, exist_ok=True)
    text = (
        DOC.read_text()
        if DOC.exists()
        else "# Benchmarks\n\nRatios against peers measured in the same run. Regenerate with the commands shown per section.\n"
    )
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    text = (
        pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    )
    DOC.write_text(text)


def loaders_dataset(samples: int) -> tuple[Path, list[str]]:
    """The loader benchmarks' shared set: ``samples`` ImageNet-like JPEGs in 16 MB shards, made once
    under iobench's cache directory (and reused); its root and its shard paths."""
    from iobench.datasets.manifest import Manifest
    from iobench.datasets.synth import ensure_dataset
    from iobench.host.cachedir import cache_dir

    root = cache_dir() / "datasets" / f"bench-loaders-{samples}"
    ensure_dataset(root, samples=samples, seed=0, shard_bytes=16 * 10**6)
    return root, [str(p) for p in Manifest.load(root).shard_paths(root)]


def warm_jpegs(urls: list[str]) -> list[bytes]:
    """The shards' JPEGs in memory, in shard order, with the shards' pages in the page cache: the
    work of the decode ceilings, and loaders that then read warm."""
    from iobench.host import pagecache
    from loaders.formats.tar import iter_samples

    pagecache.warm(urls)
    jpegs: list[bytes] = []
    for url in urls:
        with open(url, "rb") as f:
            jpegs += [s.parts["jpg"] for s in iter_samples(f, url)]
    return jpegs
