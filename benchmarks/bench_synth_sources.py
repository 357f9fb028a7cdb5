"""The synthetic set from the photos iobench ships against the one from scikit-image's photos.

    python benchmarks/bench_synth_sources.py [--samples 400] [--rounds 7] [--seed 0]

Until the 12-photo set read from scikit-image's installed ``skimage/data`` was replaced by the
public-domain/CC0 photos in ``iobench/datasets/photo_sources``, the synthetic dataset was built
from the former; this checks that the switch keeps the two figures a decoder cares about within
5 %: the mean JPEG size and the decode cost per KB (simplejpeg, one core). Each set is calibrated
to the 110 KiB target exactly as ``iobench dataset synth`` does, then renders the same sample
indices of one seed; decoding alternates between the sets in interleaved rounds, and the ratio
is the median of per-round ratios. Needs scikit-image installed for the old set only (its data
files are read directly; it is not a dependency of iobench).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import simplejpeg
from common import host_line, interleaved, median, paired, spread, write_section
from PIL import Image

from iobench.datasets import photos, synth

# The set as it was (iobench/datasets/photos.py before the switch): file, weight, grayscale.
OLD_SOURCES = (
    ("astronaut.png", 1.0, False),
    ("chelsea.png", 1.0, False),
    ("coffee.png", 1.0, False),
    ("rocket.jpg", 1.0, False),
    ("motorcycle_left.png", 1.0, False),
    ("ihc.png", 0.3, False),
    ("hubble_deep_field.jpg", 0.2, False),
    ("retina.jpg", 0.2, False),
    ("camera.png", 0.3, True),
    ("grass.png", 0.25, True),
    ("gravel.png", 0.25, True),
    ("brick.png", 0.25, True),
)


def old_photos() -> tuple[photos.Photo, ...]:
    spec = importlib.util.find_spec("skimage")
    if spec is None or spec.origin is None:
        raise SystemExit("the old set is read from scikit-image's data files: pip install scikit-image")
    root = Path(spec.origin).parent / "data"
    out = []
    for fname, weight, grey in OLD_SOURCES:
        with Image.open(root / fname) as im:
            im = im.convert("RGB")
            if max(im.size) > photos.MAX_SIDE:
                k = photos.MAX_SIDE / max(im.size)
                im = im.resize((round(im.width * k), round(im.height * k)), Image.Resampling.LANCZOS)
            rgb = np.ascontiguousarray(np.asarray(im))
        out.append(photos.Photo(Path(fname).stem, rgb, weight, grey))
    return tuple(out)


def build(photo_set: tuple[photos.Photo, ...], seed: int, samples: int) -> tuple[float, list[bytes]]:
    """Calibrate on ``photo_set`` as synthesize() does, then render samples 0..samples-1."""
    original = photos.load_photos
    photos.load_photos = lambda: photo_set  # render_jpeg() and fingerprint() look it up by name
    synth._CALIBRATION_CACHE.clear()
    try:
        scale, _ = synth.calibrate_noise(110.0)
        return scale, [synth.render_sample(seed, i, scale)[0] for i in range(samples)]
    finally:
        photos.load_photos = original


def decode_seconds_per_kb(jpegs: list[bytes], kb: float) -> float:
    t0 = time.perf_counter()
    for j in jpegs:
        simplejpeg.decode_jpeg(j)
    return (time.perf_counter() - t0) / kb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    os.environ["IOBENCH_CACHE"] = tempfile.mkdtemp(prefix="iobench-bench-synth-")  # calibrate afresh

    sets = {"scikit-image (old)": old_photos(), "shipped (new)": photos.load_photos()}
    built = {name: build(s, args.seed, args.samples) for name, s in sets.items()}
    kb = {name: sum(map(len, jpegs)) / 1024 for name, (_, jpegs) in built.items()}
    mean_kib = {name: kb[name] / args.samples for name in built}
    times = interleaved(
        {
            name: (lambda j=jpegs, k=kb[name]: decode_seconds_per_kb(j, k))
            for name, (_, jpegs) in built.items()
        },
        rounds=args.rounds,
    )
    old, new = list(built)
    lines = [
        f"{host_line()}; {args.samples} samples of seed {args.seed} per set, each set calibrated "
        f"to 110 KiB; decode: simplejpeg, one core, {args.rounds} interleaved rounds, medians.",
        "",
        "| photo set | noise scale | mean JPEG (KiB) | decode (µs per KiB) | spread |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (scale, _) in built.items():
        lines.append(
            f"| {name} | {scale:.2f} | {mean_kib[name]:.1f} | {median(times[name]) * 1e6:.2f} "
            f"| {spread(times[name]):.0f} % |"
        )
    size_ratio = mean_kib[new] / mean_kib[old]
    cost_ratio = paired(times[new], times[old])
    lines += [
        "",
        f"New / old: mean JPEG size **{size_ratio:.3f}**, decode cost per KiB **{cost_ratio:.3f}** "
        "(median of per-round ratios); goal: both within 0.95-1.05. The old set is read from "
        "scikit-image's data files, so regenerating needs `pip install scikit-image` (no longer an "
        "iobench dependency).",
    ]
    body = "\n".join(lines)
    print(body)
    if not args.no_write:
        write_section(
            "synth-sources",
            "## Synthetic set: shipped photos vs scikit-image's (`python benchmarks/bench_synth_sources.py`)\n\n"
            + body,
        )


if __name__ == "__main__":
    main()
