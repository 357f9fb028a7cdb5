"""Per-core JPEG decode + augment rate: given, read from a run's stage times, or measured here.

Decode + augment is the CPU work a training input pipeline cannot skip (docs/method.md, stage
attribution), so demand ÷ this rate is a lower bound on the cores needed: fetch, collation and the
training loop itself take CPU on top.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DecodeRate:
    samples_per_s_per_core: float
    source: str  # where the figure comes from, in words


def given_rate(rate: float) -> DecodeRate:
    if rate <= 0:
        raise ValueError(f"--decode-rate {rate}: must be a positive number of samples/s per core")
    return DecodeRate(rate, "given with --decode-rate")


def rate_from_run(run_dir: str | Path) -> DecodeRate:
    """The median over a run's ok cells of 1000 / (decode + augment CPU ms per sample). CPU time,
    not wall: wall time includes waiting for a core when workers outnumber them."""
    from iobench.results.store import cell_summaries

    ok = [s for s in cell_summaries(Path(run_dir)) if s.ok]
    cpu = [s.stage_cpu_ms_per_sample for s in ok]
    per_sample_ms = [c["decode"] + c["augment"] for c in cpu if c.get("decode") and "augment" in c]
    how = f"CPU time per sample in {len(per_sample_ms)} cell(s)"
    if not per_sample_ms:  # summaries without CPU times: wall times, which only overstate the cost
        wall = [s.stage_ms_per_sample for s in ok]
        per_sample_ms = [w["decode"] + w["augment"] for w in wall if w.get("decode") and "augment" in w]
        how = f"wall time per sample in {len(per_sample_ms)} cell(s), an underestimate of the rate"
    if not per_sample_ms:
        raise ValueError(
            f"--results {run_dir}: no successful cell with decode and augment times; "
            "give --decode-rate N or leave both out to measure here"
        )
    ms = statistics.median(per_sample_ms)
    return DecodeRate(1000.0 / ms, f"from --results {run_dir}: median decode+augment {how} ({ms:.2f} ms)")


def measure_rate(jpegs: list[bytes], seconds: float = 1.0) -> float:
    """Samples/s of decode + augment on one core: ``jpegs`` in turn, for ``seconds`` of wall time,
    rated by this thread's CPU time so that other load on the host does not count."""
    from loaders.decode import AugmentSpec, augment, decode_jpeg

    rng, spec = random.Random(0), AugmentSpec()
    augment(decode_jpeg(jpegs[0]), rng, spec)  # first call pays for lazy initialisation
    done, wall_end, cpu_start = 0, time.perf_counter() + seconds, time.thread_time()
    while time.perf_counter() < wall_end or done < len(jpegs):
        augment(decode_jpeg(jpegs[done % len(jpegs)]), rng, spec)
        done += 1
    return done / (time.thread_time() - cpu_start)


def measure_here(seconds: float = 1.0, images: int = 24) -> DecodeRate:
    """Measured on this host: synthetic ImageNet-like JPEGs from the synth dataset's generator (the
    first 24 of seed 0 average 112 KiB, near ImageNet's ~110 KiB; decode cost tracks JPEG bytes)."""
    from iobench.datasets.synth import PRIOR_NOISE_SCALE, render

    jpegs = [render(0, i, PRIOR_NOISE_SCALE)[0] for i in range(images)]
    mean_kib = sum(map(len, jpegs)) / len(jpegs) / 1024
    rate = measure_rate(jpegs, seconds)
    return DecodeRate(
        rate,
        f"measured here: one core, {seconds:.0f} s of decode + RandomResizedCrop + flip (loaders.decode) "
        f"on {images} synthetic ImageNet-like JPEGs of {mean_kib:.0f} KiB mean",
    )
