"""What decoding the crop box alone saves, stage by stage, on one core.

    python benchmarks/bench_crop_decode.py [--images 200] [--rounds 7]

Synthetic ImageNet-like JPEGs (the synth dataset's generator), in memory. Per round, in turn:

- the readers' own decode and augment stages (``iobench.analysis.decoderate.measure_costs``: thread
  CPU per sample), with the crop box decoded alone and with the whole image decoded and cropped:
  decode (the box drawn and decoded) and augment (its resize and flip);
- the two libraries' whole-image decode of the same files: the region decoder's system
  libjpeg-turbo (the box set to the whole image) and simplejpeg's bundled one, the whole-image
  path's decoder. Their ratio is what the region decoder starts from;
- the region decoder asked for one pixel on the last row of each sample's crop box, and on the
  image's last row: entropy (Huffman) decoding alone down to there, the part of a region decode
  that no crop saves (a baseline JPEG's rows can only be found by decoding all before them).

Ratios are medians of per-round ratios.
"""

from __future__ import annotations

import argparse
import time

from common import host_line, interleaved, median, paired, write_section

from iobench.analysis.decoderate import measure_costs
from iobench.datasets.synth import PRIOR_NOISE_SCALE, render_sample
from loaders.pipeline import decoder_name


def library_decode(jpegs: list[bytes], region: bool) -> float:
    """CPU µs per whole-image decode into a buffer made once, by one library."""
    import numpy as np
    import simplejpeg

    from loaders.pipeline import decoders

    sizes = [simplejpeg.decode_jpeg_header(j)[:2] for j in jpegs]
    # both written before the clock starts: a page's first touch is the kernel's work, not the decoder's
    outs = [np.zeros((h, w + 32, 3), np.uint8) for h, w in sizes]
    for out in outs:
        out.fill(1)
    flat = [bytearray(h * w * 3) for h, w in sizes]
    t0 = time.thread_time()
    for jpeg, (h, w), out, buffer in zip(jpegs, sizes, outs, flat, strict=True):
        if region:
            decoders.region_decoder.decode_crop(jpeg, 0, 0, w, h, out)
        else:
            simplejpeg.decode_jpeg(jpeg, colorspace="RGB", fastdct=True, fastupsample=True, buffer=buffer)
    return (time.thread_time() - t0) / len(jpegs) * 1e6


def entropy_decode(jpegs: list[bytes], to_box: bool) -> float:
    """CPU µs per image of the region decoder asked for one pixel at the left of the last row of a
    random-resized-crop box (drawn as the readers draw theirs), or of the image: entropy decoding
    down to that row, and the pixel work of one iMCU."""
    import random

    import numpy as np
    import simplejpeg

    from loaders import AugmentSpec
    from loaders.pipeline import decoders
    from loaders.pipeline.decode import random_resized_crop_box

    rng, spec = random.Random(0), AugmentSpec()
    rows = []
    for jpeg in jpegs:
        height, width = simplejpeg.decode_jpeg_header(jpeg)[:2]
        _, y, _, h = random_resized_crop_box(rng, width, height, spec)
        rows.append(y + h - 1 if to_box else height - 1)
    out = np.ones((1, 33, 3), np.uint8)
    t0 = time.thread_time()
    for jpeg, row in zip(jpegs, rows, strict=True):
        decoders.region_decoder.decode_crop(jpeg, 0, row, 1, 1, out)
    return (time.thread_time() - t0) / len(jpegs) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    jpegs = [render_sample(0, i, PRIOR_NOISE_SCALE)[0] for i in range(args.images)]
    mean_kib = sum(map(len, jpegs)) / len(jpegs) / 1024
    stages: dict[bool, list[tuple[float, float]]] = {True: [], False: []}

    def staged(roi: bool):
        def run() -> float:
            costs = measure_costs(jpegs, 1.0, roi)
            stages[roi].append(costs)
            return sum(costs)

        return run

    started = host_line()
    totals = interleaved(
        {
            "crop box alone": staged(True),
            "whole image, then the box": staged(False),
            "system libjpeg-turbo, whole image": lambda: library_decode(jpegs, True),
            "simplejpeg, whole image": lambda: library_decode(jpegs, False),
            "entropy decoding to the box's last row": lambda: entropy_decode(jpegs, True),
            "entropy decoding to the image's last row": lambda: entropy_decode(jpegs, False),
        },
        rounds=args.rounds,
    )
    roi, whole = stages[True][1:], stages[False][1:]  # the warm-up round left out, as of the totals
    x_decode = paired([d for d, _ in roi], [d for d, _ in whole])
    x_total = paired(totals["crop box alone"], totals["whole image, then the box"])
    x_library = paired(totals["system libjpeg-turbo, whole image"], totals["simplejpeg, whole image"])
    x_entropy = paired(
        totals["entropy decoding to the image's last row"], totals["system libjpeg-turbo, whole image"]
    )
    body = f"""## Decoding the crop box alone, stage by stage (`python benchmarks/bench_crop_decode.py --images {args.images} --rounds {args.rounds}`)

Started {started}; ended at load {host_line().rsplit("load ", 1)[1]}. {args.images} synthetic ImageNet-like JPEGs
({mean_kib:.0f} KiB mean) in memory, one core, thread CPU per sample, {args.rounds} interleaved rounds
after a warm-up, medians; ratios are medians of per-round ratios.

| | decode ms | augment ms | total ms |
|---|---:|---:|---:|
| crop box alone ({decoder_name(True)}) | {median([d for d, _ in roi]):.3f} | {median([a for _, a in roi]):.3f} | {median(totals["crop box alone"]):.3f} |
| whole image, then the box ({decoder_name(False)}) | {median([d for d, _ in whole]):.3f} | {median([a for _, a in whole]):.3f} | {median(totals["whole image, then the box"]):.3f} |

Decode (the box drawn and decoded) {x_decode:.2f} ×, decode + resize + flip {x_total:.2f} × the whole
image's, at the same output (goal ≤ 0.80). Whole-image decode of the same files by the two
libraries: the system libjpeg-turbo {median(totals["system libjpeg-turbo, whole image"]):.0f} µs, simplejpeg's
bundled one {median(totals["simplejpeg, whole image"]):.0f} µs ({x_library:.2f} ×): the region decoder starts that
far behind. Entropy decoding alone (the region decoder asked for one pixel on a row), which no crop
saves: down to the box's last row {median(totals["entropy decoding to the box's last row"]):.0f} µs, down to the image's last row
{median(totals["entropy decoding to the image's last row"]):.0f} µs ({x_entropy:.2f} × the system libjpeg-turbo's whole-image decode): the floor of a
region decode of these files is the first of these, plus the pixel work of the box.
"""
    write_section("crop-decode", body)
    print(body)


if __name__ == "__main__":
    main()
