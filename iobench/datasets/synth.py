"""Synthetic ImageNet stand-in: WebDataset (or Parquet) shards of photo-derived JPEGs with ImageNet's
resolution spread and, what matters most to a decoder, its mean file size (~110 KiB).

Decode cost tracks compressed bytes (≈100 MB/s/core whatever the content), so sensor-like
noise is added with a strength calibrated to hit the target mean size. Each sample is a pure
function of ``(seed, index, noise_scale)``, so output does not depend on the worker count.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import PIL

from iobench.datasets.manifest import (
    MANIFEST_NAME,
    Manifest,
    ManifestError,
    verify,
)
from iobench.datasets.parquet import DEFAULT_ROW_GROUP, check_format, open_shard_writer, save_dataset
from iobench.datasets.photos import load_photos, noise_bank, render_jpeg, sources_fingerprint
from iobench.datasets.samplesize import DEFAULT_SAMPLE_KIB, KIB, check_sample_kib
from iobench.datasets.shardsize import auto_shard_bytes
from iobench.datasets.shardwriter import member_bytes
from iobench.host.atomic import atomic_write_json
from iobench.host.cachedir import cache_dir

GENERATOR = "iobench.synth"
GENERATOR_VERSION = 1
NUM_CLASSES = 1000
CALIBRATION_SEED = 0x5EED_CA1B
CALIBRATION_SAMPLES = 128

# NNNNNN.jpg and NNNNNN.cls headers plus the .cls block; .jpg padding averages half a block
_TAR_OVERHEAD = member_bytes(0) + 256 + member_bytes(3)
PRIOR_NOISE_SCALE = 21.0  # calibrated for 110 KiB (Pillow 13, libjpeg-turbo); only a start


def render_sample(seed: int, index: int, noise_scale: float) -> tuple[bytes, int]:
    """JPEG bytes and class id of sample ``index``; a pure function of its arguments."""
    rng = np.random.default_rng([seed, index])
    label = int(rng.integers(NUM_CLASSES))
    return render_jpeg(rng, noise_scale), label


def _render_task(args: tuple[int, int, float]) -> tuple[bytes, int]:
    return render_sample(*args)


def _worker_init() -> None:
    cv2.setNumThreads(1)  # one process per core already; cv2's own threads would oversubscribe
    load_photos()
    noise_bank()


class _Mapper:
    """Ordered map over samples, in-process or on a process pool."""

    def __init__(self, workers: int) -> None:
        self._pool = None
        if workers > 1:
            # forkserver, not fork: the caller may hold threads (torch, cv2) that fork would
            # copy in a locked state.
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            self._pool = ctx.Pool(workers, initializer=_worker_init)

    def map(self, tasks: Iterable[tuple[int, int, float]]) -> Iterator[tuple[bytes, int]]:
        if self._pool is None:
            return map(_render_task, tasks)
        return self._pool.imap(_render_task, tasks, chunksize=8)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool.join()


_CALIBRATION_CACHE: dict[tuple[float, int], tuple[float, float]] = {}


def calibrate_noise(
    target_kb: float, *, samples: int = CALIBRATION_SAMPLES, mapper: _Mapper | None = None
) -> tuple[float, float]:
    """``(noise_scale, mean_jpeg_bytes)`` putting the mean JPEG size at ``target_kb`` KiB.

    Mean size rises monotonically and smoothly with the noise scale, so a few Newton rounds
    over a fixed sample converge. The result depends only on the
    target and the library versions, so it is cached per process and on disk (``cache_dir``).
    """
    key = (float(target_kb), samples)
    if key in _CALIBRATION_CACHE:
        return _CALIBRATION_CACHE[key]
    cache_file = _calibration_cache_file(target_kb, samples)
    cached = _read_cached_calibration(cache_file)
    if cached is not None:
        _CALIBRATION_CACHE[key] = cached
        return cached
    mapper = mapper or _Mapper(1)
    target = target_kb * KIB

    def mean_size(scale: float) -> float:
        tasks = ((CALIBRATION_SEED, i, scale) for i in range(samples))
        return float(np.mean([len(jpeg) for jpeg, _ in mapper.map(tasks)]))

    # Mean size follows roughly scale**0.36 near the target, so Newton steps in log-log space
    # (slope re-estimated from the last two rounds) land within tolerance in one or two rounds.
    # The tolerance is about the sampling error of the calibration sample; tighter is noise.
    x, slope = PRIOR_NOISE_SCALE, 0.36
    best: tuple[float, float] | None = None
    prev: tuple[float, float] | None = None
    for _ in range(8):
        y = mean_size(x)
        if best is None or abs(y - target) < abs(best[1] - target):
            best = (x, y)
        if abs(y / target - 1) < 0.02:
            break
        if prev is not None and prev[0] != x and prev[1] != y:
            slope = float(np.clip(np.log(y / prev[1]) / np.log(x / prev[0]), 0.05, 2.0))
        prev = (x, y)
        x = float(np.clip(x * (target / y) ** (1 / slope), 0.25, 120.0))
    assert best is not None
    if abs(best[1] / target - 1) > 0.15:
        raise ValueError(
            f"target_kb={target_kb} is outside this generator's range "
            f"(closest: {best[1] / KIB:.0f} KiB at noise scale {best[0]:.2f})"
        )
    _CALIBRATION_CACHE[key] = best
    with contextlib.suppress(OSError):  # a read-only cache dir only costs the next run time
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(cache_file, {"noise_scale": best[0], "mean_jpeg_bytes": best[1]})
    return best


def _calibration_cache_file(target_kb: float, samples: int) -> Path:
    # Keyed by everything the result depends on, so a library upgrade recalibrates.
    ident = json.dumps(
        [
            GENERATOR_VERSION,
            float(target_kb),
            samples,
            CALIBRATION_SEED,
            _library_versions(),
            sources_fingerprint(),
        ],
        sort_keys=True,
    )
    digest = hashlib.sha256(ident.encode()).hexdigest()[:16]
    return cache_dir() / f"synth-calibration-{digest}.json"


def _read_cached_calibration(path: Path) -> tuple[float, float] | None:
    try:
        raw = json.loads(path.read_text())
        return float(raw["noise_scale"]), float(raw["mean_jpeg_bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _library_versions() -> dict[str, str]:
    return {"numpy": np.__version__, "opencv": cv2.__version__, "pillow": PIL.__version__}


def _request(
    seed: int,
    size_bytes: int | None,
    samples: int | None,
    shard_bytes: int,
    target_kb: float,
    format: str = "wds",
    row_group: int = DEFAULT_ROW_GROUP,
) -> dict[str, Any]:
    """Everything that determines the bytes of the output: equal requests, equal datasets."""
    # Parquet-only keys appear only for Parquet, so existing tar datasets keep matching their
    # recorded request (and are not regenerated) after the format option arrived.
    extra = {"format": format, "row_group": row_group} if format == "parquet" else {}
    return {
        **extra,
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "size_bytes": size_bytes,
        "samples_requested": samples,
        "shard_bytes": shard_bytes,
        "target_kb": float(target_kb),
        "libraries": _library_versions(),
        "photos": sources_fingerprint(),
    }


def synthesize(
    out: str | Path,
    *,
    size_bytes: int | None = None,
    samples: int | None = None,
    seed: int = 0,
    shard_bytes: int | None = 128 * 2**20,
    target_kb: float = DEFAULT_SAMPLE_KIB,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    format: str = "wds",
    row_group: int = DEFAULT_ROW_GROUP,
) -> Manifest:
    """Write ``out/train-NNNNNN.tar`` (+ ``.idx``) and, last, ``out/manifest.json``.

    Give either ``size_bytes`` (number of samples estimated from the calibrated mean size) or
    an exact ``samples``. ``target_kb``: the mean JPEG size in KiB (``samplesize`` says which
    sizes can be made), which also sets the sample count a ``size_bytes`` gives. Same arguments
    and library versions give byte-identical shards.
    ``format="parquet"`` writes ``train-NNNNNN.parquet`` instead (rows of key/jpg/cls in row
    groups of ``row_group`` samples): the very same samples as the tar shards of that seed.
    ``shard_bytes=None``: at least 4 shards per usable core of this host (``auto_shard_bytes``,
    from the samples and their calibrated mean size).
    """
    check_format(format)
    if (size_bytes is None) == (samples is None):
        raise ValueError("give exactly one of size_bytes or samples")
    if samples is not None and samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    if size_bytes is not None and size_bytes < 1:
        raise ValueError(f"size_bytes must be positive, got {size_bytes}")
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    check_sample_kib(target_kb)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # Until the new manifest lands the directory must not look complete.
    (out / MANIFEST_NAME).unlink(missing_ok=True)

    samples_asked = samples
    n_workers = max(1, workers if workers is not None else os.cpu_count() or 1)
    mapper = _Mapper(n_workers if samples is None or samples >= 64 else 1)
    try:
        noise_scale, cal_mean = calibrate_noise(target_kb, mapper=mapper)
        if samples is None:
            assert size_bytes is not None
            # the tar overhead for both formats: one size gives one sample count, so the two
            # formats of a request hold the same samples (Parquet files come out ~1.5% smaller)
            samples = max(1, round(size_bytes / (cal_mean + _TAR_OVERHEAD)))
        if shard_bytes is None:  # from the calibrated mean: the estimate the writer will meet
            shard_bytes = auto_shard_bytes(samples * (cal_mean + _TAR_OVERHEAD))
        request = _request(seed, size_bytes, samples_asked, shard_bytes, target_kb, format, row_group)
        jpeg_bytes = 0
        with open_shard_writer(format, out, shard_bytes, row_group=row_group) as writer:
            tasks = ((seed, i, noise_scale) for i in range(samples))
            for i, (jpeg, label) in enumerate(mapper.map(tasks)):
                writer.add(f"{i:06d}", [("jpg", jpeg), ("cls", str(label).encode("ascii"))])
                jpeg_bytes += len(jpeg)
                if progress is not None:
                    progress(i + 1, samples)
    finally:
        mapper.close()

    source = dict(request, noise_scale=noise_scale, calibration_mean_jpeg_bytes=cal_mean)
    return save_dataset(
        out,
        writer.entries,
        classes=NUM_CLASSES,
        class_names=None,
        source=source,
        jpeg_bytes=jpeg_bytes,
        format=format,
    )


def ensure_dataset(out: str | Path, **kwargs: Any) -> Manifest:
    """Reuse ``out`` when its manifest records the same request and the shard sizes check out
    (no hashing, for speed); otherwise generate it. Takes ``synthesize``'s keyword arguments."""
    defaults: dict[str, Any] = {  # synthesize's, each of its argument's own type
        "size_bytes": None,
        "samples": None,
        "seed": 0,
        "shard_bytes": 128 * 2**20,
        "target_kb": DEFAULT_SAMPLE_KIB,
        "format": "wds",
        "row_group": DEFAULT_ROW_GROUP,
    }
    unknown = set(kwargs) - set(defaults) - {"workers", "progress"}
    if unknown:
        raise TypeError(f"ensure_dataset() got unexpected arguments: {sorted(unknown)}")
    wanted = _request(**{k: kwargs.get(k, v) for k, v in defaults.items()})
    try:
        manifest = Manifest.load(out)
    except ManifestError:
        return synthesize(out, **kwargs)
    recorded = {k: manifest.source.get(k) for k in wanted}
    same_format = manifest.format == kwargs.get("format", "wds")
    if recorded == wanted and same_format and not verify(out, manifest, check_sha=False):
        return manifest
    return synthesize(out, **kwargs)
