"""What one core decodes and augments per second with the decoder recommend's reference rate is
(simplejpeg: libjpeg-turbo with SIMD, and iobench's crop and flip) against a stock Pillow pipeline
as torchvision's ImageNet example builds it (PIL decode, RandomResizedCrop to 224 with bilinear
resampling, horizontal flip, ToTensor, Normalize).

    python benchmarks/bench_decode_stacks.py [--rounds 7] [--images 48]

The same ImageNet-like JPEGs (the synthetic dataset's generator, ~115 KB mean) for both; each
contender's thread CPU time per image (other load on the host does not count), in interleaved
rounds; the ratio is the median of the per-round ratios. torchvision is not a dependency: its
transforms are written out with Pillow and torch as torchvision runs them on a PIL image.
"""

from __future__ import annotations

import argparse
import io
import math
import random
import time

from common import host_line, interleaved, median, paired, spread, write_section

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def _crop_box(width: int, height: int, rng: random.Random) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params: scale (0.08, 1), ratio (3/4, 4/3), 10 tries."""
    area = width * height
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            left, top = rng.randint(0, width - w), rng.randint(0, height - h)
            return left, top, left + w, top + h
    side = min(width, height)
    return (width - side) // 2, (height - side) // 2, (width + side) // 2, (height + side) // 2


def _pil_stock(jpeg: bytes, rng: random.Random) -> object:
    import numpy as np
    import torch
    from PIL import Image

    image = Image.open(io.BytesIO(jpeg)).convert("RGB")
    image = image.resize((224, 224), Image.BILINEAR, box=_crop_box(*image.size, rng))
    if rng.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    tensor = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).float().div_(255)
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    return tensor.sub_(mean).div_(std)


def _simplejpeg(jpeg: bytes, rng: random.Random) -> object:
    from loaders import AugmentSpec
    from loaders.pipeline import augment, decode_jpeg

    return augment(decode_jpeg(jpeg), rng, AugmentSpec())


def _per_second(fn, jpegs: list[bytes], seconds: float) -> float:  # type: ignore[no-untyped-def]
    """Images per CPU second of this thread: ``jpegs`` in turn for about ``seconds`` of wall time."""
    rng, done = random.Random(0), 0
    cpu0, end = time.thread_time(), time.perf_counter() + seconds
    while time.perf_counter() < end or done < len(jpegs):
        fn(jpegs[done % len(jpegs)], rng)
        done += 1
    return done / (time.thread_time() - cpu0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--images", type=int, default=48)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    import torch

    from iobench.datasets.synth import PRIOR_NOISE_SCALE, render_sample

    torch.set_num_threads(1)  # as in a DataLoader worker

    jpegs = [render_sample(0, i, PRIOR_NOISE_SCALE)[0] for i in range(args.images)]
    mean = sum(map(len, jpegs)) / len(jpegs)
    results = interleaved(
        {
            "simplejpeg": lambda: _per_second(_simplejpeg, jpegs, args.seconds),
            "pil": lambda: _per_second(_pil_stock, jpegs, args.seconds),
        },
        rounds=args.rounds,
    )
    fast, stock = median(results["simplejpeg"]), median(results["pil"])
    ratio = paired(results["simplejpeg"], results["pil"])
    body = f"""## Decode stacks: simplejpeg against a stock Pillow pipeline (`bench_decode_stacks.py`)

`python benchmarks/bench_decode_stacks.py --rounds {args.rounds} --images {args.images}` ({host_line()}).
{args.images} synthetic ImageNet-like JPEGs of {mean / 1e3:.0f} KB mean; images per CPU second of one
thread, medians of {args.rounds} interleaved rounds.

| decode + augment on one core | images/s | spread |
|---|---|---|
| simplejpeg (libjpeg-turbo, SIMD) + iobench's crop and flip: recommend's reference decoder | {fast:,.0f} | {spread(results["simplejpeg"]):.0f} % |
| Pillow decode + RandomResizedCrop (bilinear) + flip + ToTensor + Normalize: torchvision's stock ImageNet pipeline | {stock:,.0f} | {spread(results["pil"]):.0f} % |

simplejpeg is {ratio:.1f}x the stock pipeline per core (median of the per-round ratios). A job that
decodes with the stock pipeline needs that many times the cores: price it with `iobench recommend
--decode-rate {stock:,.0f}` (per worker, at this sample size), or calibrate on the node.
"""
    print(body)
    write_section("decode-stacks", body)


if __name__ == "__main__":
    main()
