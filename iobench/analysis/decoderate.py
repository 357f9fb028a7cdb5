"""The per-core CPU decode + augment rate: one figure per host, for inspect, recommend, the dry-run
estimate and the model.

Decode + augment is the CPU work a training input pipeline cannot skip (docs/method.md, stage
attribution), so demand ÷ this rate is a lower bound on the cores needed. Where it comes from, in
order (:func:`resolve`):

1. given (``--decode-rate``);
2. a run's cells (``--results``): the median thread CPU time of decode and of augment per sample;
3. this host's calibration: the latest of what ``iobench inspect`` measured and what a sweep's
   cells measured (:func:`save`, :func:`keep_from_run`);
4. the reference figures of docs/recommend.md, named as an assumption.

The rate depends on the sample's size, so it is kept as two costs: decode, taken proportional to
the JPEG's bytes (libjpeg-turbo's work grows with the coded data: 9.8-9.9 µs per KiB over the
synthetic and photographic sets of docs/benchmarks.md), and augment, a fixed cost per sample (the
crop is resized to the same output whatever the input). :meth:`DecodeRate.at` gives the rate at
any sample size and says how it was scaled.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from iobench.host.atomic import atomic_write_json
from iobench.host.cachedir import cache_dir
from iobench.host.machine import this_host
from iobench.host.units import format_bytes

KIB = 1024.0
# ImageNet's training JPEGs average ~110 KiB: the size a rate is quoted at when none is asked
REFERENCE_SAMPLE_BYTES = 110 * KIB
# docs/recommend.md, "Reference figures": measured on a 2-core cloud VM (simplejpeg + iobench's
# RandomResizedCrop + flip, thread CPU time, 24 synthetic ImageNet-like JPEGs of 111 KiB mean)
ASSUMED_DECODE_US_PER_KIB = 9.8
ASSUMED_AUGMENT_MS = 0.11
ASSUMED_SOURCE = (
    "assumed: docs/recommend.md 'Reference figures' (decode 9.8 µs per KiB of JPEG + augment 0.11 ms per "
    "sample on one core of a 2-core cloud VM; `iobench inspect --accelerators 1xH100` measures this host)"
)
CALIBRATION_FILE = "decode-rate.json"


@dataclass(frozen=True)
class DecodeRate:
    """CPU ms per sample on one core = decode (µs per KiB × the sample's KiB) + augment."""

    decode_us_per_kib: float
    augment_ms: float
    measured_at_bytes: float  # the mean sample size the figures were measured (or given) at
    source: str
    kind: str  # "given" | "run" | "calibration" | "assumed"

    def ms_per_sample(self, sample_bytes: float | None = None) -> float:
        size = self.measured_at_bytes if sample_bytes is None else sample_bytes
        return self.decode_us_per_kib * size / KIB / 1000.0 + self.augment_ms

    def per_core(self, sample_bytes: float | None = None) -> float:
        """Samples/s one core decodes and augments at ``sample_bytes`` (default: as measured)."""
        return 1000.0 / self.ms_per_sample(sample_bytes)

    def scaling(self, sample_bytes: float) -> str:
        """How the rate at ``sample_bytes`` follows from the one measured; empty when the same."""
        if abs(sample_bytes - self.measured_at_bytes) <= 0.01 * self.measured_at_bytes:
            return ""
        return (
            f"scaled from {self.per_core():,.0f}/s at {format_bytes(self.measured_at_bytes)}: decode in "
            f"proportion to the bytes (x{sample_bytes / self.measured_at_bytes:.2f}), augment unchanged"
        )

    def describe(self, sample_bytes: float | None = None) -> str:
        size = self.measured_at_bytes if sample_bytes is None else sample_bytes
        how = self.scaling(size)
        return (
            f"{self.per_core(size):,.0f} samples/s per core at {format_bytes(size)} per sample "
            f"({self.source}{'; ' + how if how else ''})"
        )

    def as_dict(self, sample_bytes: float | None = None) -> dict:
        size = self.measured_at_bytes if sample_bytes is None else sample_bytes
        return {**asdict(self), "sample_bytes": size, "samples_per_s_per_core": self.per_core(size)}


ASSUMED = DecodeRate(ASSUMED_DECODE_US_PER_KIB, ASSUMED_AUGMENT_MS, 111 * KIB, ASSUMED_SOURCE, "assumed")


def given(samples_per_s_per_core: float, sample_bytes: float = REFERENCE_SAMPLE_BYTES) -> DecodeRate:
    """A rate given at ``sample_bytes`` (all of it taken as decode, so it scales with the bytes)."""
    if samples_per_s_per_core <= 0:
        raise ValueError(
            f"--decode-rate {samples_per_s_per_core}: must be a positive number of samples/s per core"
        )
    us_per_kib = 1e6 / samples_per_s_per_core / (sample_bytes / KIB)
    return DecodeRate(us_per_kib, 0.0, sample_bytes, "given with --decode-rate", "given")


def from_costs(costs: Sequence[tuple[float, float, float]], source: str, kind: str) -> DecodeRate:
    """From per-cell (decode ms, augment ms, sample bytes): the median of each cost."""
    if not costs:
        raise ValueError("no decode and augment times to rate")
    return DecodeRate(
        decode_us_per_kib=statistics.median(1000.0 * d / (b / KIB) for d, _, b in costs),
        augment_ms=statistics.median(a for _, a, _ in costs),
        measured_at_bytes=statistics.median(b for _, _, b in costs),
        source=source,
        kind=kind,
    )


def from_runs(run_dirs: Iterable[str | Path]) -> DecodeRate:
    """The median decode and augment thread CPU time per sample over the ok cells of runs, each at
    its dataset's mean sample size (from the cell's manifest)."""
    from iobench.results.store import cell_summaries, read_manifest

    dirs = [Path(d) for d in run_dirs]
    costs, wall = [], False
    for run_dir in dirs:
        for s in cell_summaries(run_dir):
            manifest = read_manifest(run_dir, s.cell_id) if s.ok else None
            if manifest is None or not manifest.dataset.mean_sample_bytes:
                continue
            ms = s.stage_cpu_ms_per_sample or s.stage_ms_per_sample  # old summaries: wall times
            wall |= not s.stage_cpu_ms_per_sample
            if ms.get("decode") and "augment" in ms:
                # the cell's own augment, without the extra CPU a sweep file asked it to spend
                augment = max(0.0, ms["augment"] - s.cell.loader.augment_cpu_ms)
                costs.append((ms["decode"], augment, float(manifest.dataset.mean_sample_bytes)))
    names = " ".join(str(d) for d in dirs)
    if not costs:
        raise ValueError(
            f"--results {names}: no successful cell with decode and augment times; "
            "give --decode-rate N or leave --results out"
        )
    how = "wall time (an underestimate of the rate)" if wall else "thread CPU time"
    return from_costs(
        costs, f"measured: median decode and augment {how} of {len(costs)} cell(s) in {names}", "run"
    )


def measure_costs(jpegs: list[bytes], seconds: float = 1.0) -> tuple[float, float]:
    """(decode ms, augment ms) per sample on one core: ``jpegs`` in turn for about ``seconds``,
    timed by this thread's CPU time so that other load on the host does not count."""
    from loaders import AugmentSpec
    from loaders.pipeline import augment, decode_jpeg

    rng, spec = random.Random(0), AugmentSpec()
    augment(decode_jpeg(jpegs[0]), rng, spec)  # the first call pays for lazy initialisation
    done, decode_s, augment_s = 0, 0.0, 0.0
    wall_end = time.perf_counter() + seconds
    while time.perf_counter() < wall_end or done < len(jpegs):
        t0 = time.thread_time()
        image = decode_jpeg(jpegs[done % len(jpegs)])
        t1 = time.thread_time()
        augment(image, rng, spec)
        decode_s += t1 - t0
        augment_s += time.thread_time() - t1
        done += 1
    return 1000.0 * decode_s / done, 1000.0 * augment_s / done


def measure_here(seconds: float = 1.0, images: int = 24) -> DecodeRate:
    """Measured on this host: synthetic ImageNet-like JPEGs from the synth dataset's generator."""
    from iobench.datasets.synth import PRIOR_NOISE_SCALE, render

    jpegs = [render(0, i, PRIOR_NOISE_SCALE)[0] for i in range(images)]
    mean = sum(map(len, jpegs)) / len(jpegs)
    decode_ms, augment_ms = measure_costs(jpegs, seconds)
    return DecodeRate(
        1000.0 * decode_ms / (mean / KIB),
        augment_ms,
        mean,
        f"measured on {this_host()} at {time.strftime('%Y-%m-%d %H:%M')}: one core, {seconds:g} s of decode + "
        f"RandomResizedCrop + flip (loaders.pipeline.decode) on {images} synthetic ImageNet-like JPEGs",
        "calibration",
    )


def save(rate: DecodeRate) -> Path:
    """Keep ``rate`` as this host's calibration (in iobench's cache directory)."""
    path = cache_dir() / CALIBRATION_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"host": this_host(), **asdict(rate)})
    return path


def keep_from_run(run_dir: str | Path) -> DecodeRate | None:
    """After a sweep on this host: its cells' rate becomes this host's calibration (the latest
    measurement wins, a sweep's or inspect's). None when no cell measured decode and augment."""
    try:
        rate = from_runs([run_dir])
    except ValueError:
        return None
    rate = replace(rate, kind="calibration", source=f"{rate.source}, on {this_host()}")
    try:
        save(rate)
    except OSError:
        return None  # a read-only home: the figure is in the run anyway
    return rate


def load_calibration() -> DecodeRate | None:
    """This host's calibration, if one was measured here (a file from another host is ignored)."""
    path = cache_dir() / CALIBRATION_FILE
    try:
        doc = json.loads(path.read_text())
        if doc.pop("host") != this_host():
            return None
        return DecodeRate(**doc)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def resolve(
    *,
    rate: float | None = None,
    results: Sequence[str | Path] | None = None,
    sample_bytes: float = REFERENCE_SAMPLE_BYTES,
) -> DecodeRate:
    """The rate to use: given (at ``sample_bytes``), else from runs, else this host's calibration,
    else assumed."""
    if rate is not None:
        return given(rate, sample_bytes)
    if results:
        return from_runs(results)
    return load_calibration() or ASSUMED
