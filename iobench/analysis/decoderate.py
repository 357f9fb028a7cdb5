"""The per-core CPU decode + augment rate: one figure per host, for inspect, recommend, the dry-run
estimate and the model.

Decode + augment is the CPU work a training input pipeline cannot skip (docs/method.md, stage
attribution), so demand ÷ this rate is a lower bound on the cores needed. Where it comes from, in
order (:func:`resolve`):

1. given (``--decode-rate``);
2. a run's cells (``--results``): the median thread CPU time of decode and of augment per sample;
3. this host's calibration: the latest of what ``iobench inspect`` measured and what a sweep's
   cells measured (:func:`keep_rate`, :func:`keep_from_run`);
4. the reference figures of docs/recommend.md, named as an assumption.

The rate depends on the sample's size, so it is kept as two costs: decode, taken proportional to
the JPEG's bytes (libjpeg-turbo's work grows with the coded data: 9.8-9.9 µs per KiB over the
synthetic and photographic sets of docs/benchmarks.md), and augment, a fixed cost per sample (the
crop is resized to the same output whatever the input). :meth:`DecodeRate.at` gives the rate at
any sample size and says how it was scaled.

The rate is the decoder's: decoding the crop box alone (the loaders' default where their region
decoder is built) costs less CPU than decoding the whole image. Each rate names its decoder
(``loaders.pipeline.decoder_name``), this host's calibration keeps one rate per decoder, and a
resolved rate is the one of the decoder the loaders use here unless another is asked for.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from iobench.host import calibrations
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


@dataclass(frozen=True)
class DecodeRate:
    """CPU ms per sample on one core = decode (µs per KiB × the sample's KiB) + augment."""

    decode_us_per_kib: float
    augment_ms: float
    measured_at_bytes: float  # the mean sample size the figures were measured (or given) at
    source: str
    kind: str  # "given" | "run" | "calibration" | "assumed"
    decoder: str = ""  # whose CPU it is (loaders.pipeline.decoder_name); "" where not known

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
        by = f", {self.decoder}" if self.decoder else ""
        return (
            f"{self.per_core(size):,.0f} samples/s per core at {format_bytes(size)} per sample{by} "
            f"({self.source}{'; ' + how if how else ''})"
        )

    def as_dict(self, sample_bytes: float | None = None) -> dict:
        size = self.measured_at_bytes if sample_bytes is None else sample_bytes
        return {**asdict(self), "sample_bytes": size, "samples_per_s_per_core": self.per_core(size)}


ASSUMED = DecodeRate(
    ASSUMED_DECODE_US_PER_KIB,
    ASSUMED_AUGMENT_MS,
    111 * KIB,
    ASSUMED_SOURCE,
    "assumed",
    "simplejpeg whole-image decode",
)


def default_decoder() -> str:
    """The decoder the loaders use here by default (the crop region's, where it is built)."""
    from loaders.pipeline import decoder_name

    return decoder_name(True)


def given(samples_per_s_per_core: float, sample_bytes: float = REFERENCE_SAMPLE_BYTES) -> DecodeRate:
    """A rate given at ``sample_bytes`` (all of it taken as decode, so it scales with the bytes)."""
    if samples_per_s_per_core <= 0:
        raise ValueError(
            f"--decode-rate {samples_per_s_per_core}: must be a positive number of samples/s per core"
        )
    us_per_kib = 1e6 / samples_per_s_per_core / (sample_bytes / KIB)
    return DecodeRate(us_per_kib, 0.0, sample_bytes, "given with --decode-rate", "given")


def from_costs(
    costs: Sequence[tuple[float, float, float]], source: str, kind: str, decoder: str = ""
) -> DecodeRate:
    """From per-cell (decode ms, augment ms, sample bytes): the median of each cost."""
    if not costs:
        raise ValueError("no decode and augment times to rate")
    return DecodeRate(
        decode_us_per_kib=statistics.median(1000.0 * d / (b / KIB) for d, _, b in costs),
        augment_ms=statistics.median(a for _, a, _ in costs),
        measured_at_bytes=statistics.median(b for _, _, b in costs),
        source=source,
        kind=kind,
        decoder=decoder,
    )


def rates_of_runs(run_dirs: Iterable[str | Path]) -> dict[str, DecodeRate]:
    """Per decoder the cells of runs used (``""``: cells measured before decoders were named), the
    median decode and augment thread CPU time per sample over its ok cells, each at its dataset's
    mean sample size (from the cell's manifest); the decoder most cells used first."""
    from iobench.results.store import cell_summaries, read_manifest

    dirs = [Path(d) for d in run_dirs]
    costs: dict[str, list[tuple[float, float, float]]] = {}
    wall = False
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
                decode = max(0.0, ms["decode"] - s.cell.loader.decode_cpu_ms)
                cost = (decode, augment, float(manifest.dataset.mean_sample_bytes))
                costs.setdefault(s.decoder or "", []).append(cost)
    names = " ".join(str(d) for d in dirs)
    if not costs:
        raise ValueError(
            f"--results {names}: no successful cell with decode and augment times; "
            "give --decode-rate N or leave --results out"
        )
    how = "wall time (an underestimate of the rate)" if wall else "thread CPU time"
    return {
        decoder: from_costs(
            cells,
            f"measured: median decode and augment {how} of {len(cells)} cell(s) in {names}",
            "run",
            decoder,
        )
        for decoder, cells in sorted(costs.items(), key=lambda item: -len(item[1]))
    }


def from_runs(run_dirs: Iterable[str | Path]) -> DecodeRate:
    """The rate of the decoder most of the runs' cells used (:func:`rates_of_runs`)."""
    return next(iter(rates_of_runs(run_dirs).values()))


def measure_costs(jpegs: list[bytes], seconds: float = 1.0, roi: bool = True) -> tuple[float, float]:
    """(decode ms, augment ms) per sample on one core, as a reader with ``decode_roi=roi`` spends
    them (decode: the crop box drawn and decoded; augment: its resize and flip): ``jpegs`` in turn
    for about ``seconds``, timed by this thread's CPU time so that other load on the host does not
    count."""
    from loaders import AugmentSpec
    from loaders.pipeline import decode_crop, resize_flip

    rng, spec = random.Random(0), AugmentSpec()
    resize_flip(
        decode_crop(jpegs[0], rng, spec, roi), rng, spec
    )  # the first call pays for lazy initialisation
    done, decode_s, augment_s = 0, 0.0, 0.0
    wall_end = time.perf_counter() + seconds
    while time.perf_counter() < wall_end or done < len(jpegs):
        t0 = time.thread_time()
        crop = decode_crop(jpegs[done % len(jpegs)], rng, spec, roi)
        t1 = time.thread_time()
        resize_flip(crop, rng, spec)
        decode_s += t1 - t0
        augment_s += time.thread_time() - t1
        done += 1
    return 1000.0 * decode_s / done, 1000.0 * augment_s / done


def measure_here(seconds: float = 1.0, images: int = 24, roi: bool = True) -> DecodeRate:
    """Measured on this host with the decoder of ``decode_roi=roi``: synthetic ImageNet-like JPEGs
    from the synth dataset's generator."""
    from iobench.datasets.synth import PRIOR_NOISE_SCALE, render_sample
    from loaders.pipeline import decoder_name

    jpegs = [render_sample(0, i, PRIOR_NOISE_SCALE)[0] for i in range(images)]
    mean = sum(map(len, jpegs)) / len(jpegs)
    decode_ms, augment_ms = measure_costs(jpegs, seconds, roi)
    return DecodeRate(
        1000.0 * decode_ms / (mean / KIB),
        augment_ms,
        mean,
        f"measured on {this_host()} at {time.strftime('%Y-%m-%d %H:%M')}: one core, {seconds:g} s of decode + "
        f"RandomResizedCrop + flip (loaders.pipeline) on {images} synthetic ImageNet-like JPEGs",
        "calibration",
        decoder_name(roi),
    )


def keep_rate(rate: DecodeRate) -> Path:
    """Keep ``rate`` as this host's calibration of its decoder (iobench/host/calibrations.py)."""
    return calibrations.keep("decode_rate", rate.decoder, asdict(rate))


def keep_from_run(run_dir: str | Path) -> DecodeRate | None:
    """After a sweep on this host: its cells' rates become this host's calibration of their
    decoders (the latest measurement wins, a sweep's or inspect's). Returns the rate of the decoder
    most cells used; None when no cell measured decode and augment."""
    try:
        rates = rates_of_runs([run_dir])
    except ValueError:
        return None
    kept = [replace(r, kind="calibration", source=f"{r.source}, on {this_host()}") for r in rates.values()]
    try:
        for rate in kept:
            keep_rate(rate)
    except OSError:
        pass  # a read-only home: the figures are in the run anyway
    return kept[0]


def load_calibration(decoder: str | None = None) -> DecodeRate | None:
    """This host's calibration of ``decoder`` (default: the one the loaders use here), if one was
    measured here."""
    doc = calibrations.kept("decode_rate").get(default_decoder() if decoder is None else decoder)
    try:
        return DecodeRate(**doc) if doc else None
    except TypeError:
        return None


def resolve(
    *,
    rate: float | None = None,
    results: Sequence[str | Path] | None = None,
    sample_bytes: float = REFERENCE_SAMPLE_BYTES,
    decoder: str | None = None,
) -> DecodeRate:
    """The rate to use: given (at ``sample_bytes``), else from runs (their cells' decoder), else
    this host's calibration of ``decoder`` (default: the one the loaders use here), else assumed."""
    if rate is not None:
        return given(rate, sample_bytes)
    if results:
        return from_runs(results)
    return load_calibration(decoder) or ASSUMED
