"""JPEG decode and ImageNet training augmentation: uint8 out, normalisation deferred to the batch.

simplejpeg (libjpeg-turbo, fast DCT and upsampling) was the fastest CPU decoder measured on this
kind of machine; PIL is the fallback for the few JPEGs libjpeg-turbo cannot turn into RGB
(CMYK, for example). Crop, resize and flip run in OpenCV with one thread, because loader workers
already provide the parallelism.
"""

from __future__ import annotations

import io
import math
import random
import time

import cv2
import numpy as np
import simplejpeg
import torch
from PIL import Image

from loaders.config import AugmentSpec

cv2.setNumThreads(1)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class CorruptImage(ValueError):
    """The bytes of a sample's image cannot be decoded."""


# PIL's decompression-bomb limit: a few kB of JPEG may declare 60,000 x 60,000 pixels (10.8 GB)
MAX_PIXELS = 89_478_485


def decode_jpeg(data: bytes) -> np.ndarray:
    """bytes -> H x W x 3 uint8 RGB."""
    try:
        height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:
        pass  # not a JPEG libjpeg-turbo reads: PIL below applies its own limit
    else:
        if height * width > MAX_PIXELS:
            raise CorruptImage(
                f"declares {width} x {height} pixels, over the {MAX_PIXELS:,}-pixel limit "
                f"({len(data)} bytes: a decompression bomb or a corrupt header)"
            )
        try:
            return simplejpeg.decode_jpeg(data, colorspace="RGB", fastdct=True, fastupsample=True)
        except ValueError:
            pass
    try:
        with Image.open(io.BytesIO(data)) as im:
            return np.asarray(im.convert("RGB"))
    except Exception as exc:  # PIL raises many types for bad data; all mean the same here
        raise CorruptImage(f"cannot decode image ({len(data)} bytes): {exc}") from None


def random_resized_crop_box(
    rng: random.Random, width: int, height: int, spec: AugmentSpec
) -> tuple[int, int, int, int]:
    """torchvision.transforms.RandomResizedCrop.get_params: (x, y, w, h)."""
    area = width * height
    log_lo, log_hi = math.log(spec.ratio[0]), math.log(spec.ratio[1])
    for _ in range(10):
        target = area * rng.uniform(*spec.scale)
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    in_ratio = width / height
    if in_ratio < spec.ratio[0]:
        w, h = width, round(width / spec.ratio[0])
    elif in_ratio > spec.ratio[1]:
        w, h = round(height * spec.ratio[1]), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def crop_box(image: np.ndarray, rng: random.Random, spec: AugmentSpec) -> np.ndarray:
    """The random-resized-crop box of a decoded image, drawn from ``rng`` (a view, no copy)."""
    height, width = image.shape[:2]
    x, y, w, h = random_resized_crop_box(rng, width, height, spec)
    return image[y : y + h, x : x + w]


def resize_flip(
    crop: np.ndarray, rng: random.Random, spec: AugmentSpec, out: np.ndarray | None = None
) -> np.ndarray:
    """A crop box's pixels -> size x size x 3 uint8 (contiguous), flipped at random, written into
    ``out`` when given (a slot of the batch buffer, so that collating needs no copy)."""
    size = (spec.size, spec.size)
    if spec.flip and rng.random() < 0.5:
        return cv2.flip(cv2.resize(crop, size, interpolation=cv2.INTER_LINEAR), 1, dst=out)
    return cv2.resize(crop, size, dst=out, interpolation=cv2.INTER_LINEAR)


def augment(
    image: np.ndarray, rng: random.Random, spec: AugmentSpec, out: np.ndarray | None = None
) -> np.ndarray:
    """H x W x 3 uint8 -> size x size x 3 uint8: :func:`crop_box`, then :func:`resize_flip`."""
    return resize_flip(crop_box(image, rng, spec), rng, spec, out)


def spend_cpu(seconds: float) -> None:
    """Keep this thread on the CPU for ``seconds`` of its own CPU time (not wall time: a reader that
    waits for a core still does all of the work), standing in for transforms this loader lacks."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def collate_images(images: list[np.ndarray]) -> torch.Tensor:
    """Stack H x W x C uint8 images into an N x C x H x W tensor in channels_last memory format.

    The permute is a view: a channels_last model consumes the stack without another copy.
    """
    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)


def normalize_batch(
    images: torch.Tensor,
    mean: tuple[float, ...] = IMAGENET_MEAN,
    std: tuple[float, ...] = IMAGENET_STD,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """uint8 N x C x H x W -> normalised float on the tensor's device (do it on the GPU)."""
    scale = torch.tensor(std, device=images.device, dtype=dtype).view(1, -1, 1, 1) * 255.0
    shift = torch.tensor(mean, device=images.device, dtype=dtype).view(1, -1, 1, 1) * 255.0
    return images.to(dtype).sub_(shift).div_(scale)
