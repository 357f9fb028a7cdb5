"""ImageNet-like JPEGs rendered from real photographs that ship inside this package.

The synthetic ImageNet stand-in needs natural-image statistics (edges, textures, colour
correlations) so that JPEG entropy coding behaves as on real photos; these files give that
without network access. They live in ``photo_sources/`` beside this module (package data),
each public domain or CC0 (provenance and licence per file in ``photo_sources/README.md``),
stored losslessly and already capped to ``MAX_SIDE``, so a fresh install needs no image
library beyond Pillow.
"""

from __future__ import annotations

import importlib.resources
import io
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import cast

import cv2
import numpy as np
import numpy.typing as npt
from PIL import Image


@dataclass(frozen=True)
class Photo:
    name: str
    pixels: np.ndarray  # HxWx3 uint8 RGB
    weight: float  # relative sampling weight
    grayscale: bool  # a grey source, tinted per sample so it is not a grey image


# (file, weight, grayscale). Weights favour everyday colour scenes; dark astronomy/medical
# photos and textures are real but unlike ImageNet, so they appear less often. The files are
# scikit-image's sample photos whose licence is public domain or CC0 (scikit-image's
# motorcycle, from the Middlebury stereo set, and its IHC slide carry no such licence and are
# not shipped).
SOURCES: tuple[tuple[str, float, bool], ...] = (
    ("astronaut.png", 1.0, False),
    ("chelsea.png", 1.0, False),
    ("coffee.png", 1.0, False),
    ("rocket.jpg", 1.0, False),
    ("hubble_deep_field.png", 0.2, False),
    ("retina.png", 0.2, False),
    ("camera.png", 0.3, True),
    ("grass.png", 0.25, True),
    ("gravel.png", 0.25, True),
    ("brick.png", 0.25, True),
)

SOURCE_DIR = "photo_sources"


class PhotoSourceError(RuntimeError):
    """The photos shipped with iobench are missing or unreadable (a broken install)."""


def data_dir() -> Path:
    """Directory of the bundled source photos (package data of ``iobench.datasets``)."""
    return Path(str(importlib.resources.files(__package__) / SOURCE_DIR))


_LUMA = np.array([0.299, 0.587, 0.114])
_ASPECTS = (4 / 3, 3 / 2, 1.0, 5 / 4, 16 / 9)  # the sixth choice is uniform in [1, 2]
_ASPECT_P = (0.55, 0.2, 0.1, 0.05, 0.05, 0.05)
_NOISE_BANK_SIDE = 1024

# Output images have a long side of at most 500 px; bigger sources only cost resize time.
MAX_SIDE = 800


@lru_cache(maxsize=1)
def load_photos() -> tuple[Photo, ...]:
    """All source photos as RGB arrays, long side capped at ``MAX_SIDE`` (cached per process)."""
    root = data_dir()
    photos = []
    for fname, weight, grey in SOURCES:
        path = root / fname
        try:
            # Stored pre-capped; the cap stays so a larger replacement file still works.
            with Image.open(path) as source:
                im = source.convert("RGB")
                if max(im.size) > MAX_SIDE:
                    k = MAX_SIDE / max(im.size)
                    size = (round(im.width * k), round(im.height * k))
                    im = im.resize(size, Image.Resampling.LANCZOS)
                rgb = np.asarray(im)
        except OSError as exc:
            raise PhotoSourceError(
                f"cannot read the source photo {path} that ships with iobench ({exc}); the "
                "install is incomplete (package data missing?): reinstall iobench"
            ) from exc
        photos.append(Photo(Path(fname).stem, np.ascontiguousarray(rgb), weight, grey))
    return tuple(photos)


def sources_fingerprint() -> str:
    """Names and sizes of the sources: part of the generator identity recorded in manifests."""
    return ",".join(f"{p.name}:{p.pixels.shape[1]}x{p.pixels.shape[0]}" for p in load_photos())


@lru_cache(maxsize=1)
def noise_bank() -> np.ndarray:
    # Drawing fresh Gaussian noise for every image was the single biggest cost; a fixed field
    # sampled at a random offset compresses the same (JPEG cannot exploit repeats across
    # files). Luma noise plus half-strength chroma noise, like a camera sensor.
    rng = np.random.default_rng(0x0015E)
    z = rng.standard_normal((_NOISE_BANK_SIDE, _NOISE_BANK_SIDE, 4), dtype=np.float32)
    return np.ascontiguousarray(z[..., :1] + 0.5 * z[..., 1:])


def sample_size(rng: np.random.Generator) -> tuple[int, int]:
    """(width, height) like ImageNet train: long side 500 half the time, else 300-500; mostly
    4:3; 70 % landscape; short side clipped to [200, 500]."""
    long_side = 500 if rng.random() < 0.5 else int(rng.uniform(300, 500))
    k = int(rng.choice(len(_ASPECT_P), p=_ASPECT_P))
    aspect = _ASPECTS[k] if k < len(_ASPECTS) else rng.uniform(1.0, 2.0)
    short_side = int(np.clip(round(long_side / aspect), 200, 500))
    return (long_side, short_side) if rng.random() < 0.7 else (short_side, long_side)


def render_jpeg(rng: np.random.Generator, noise_scale: float) -> bytes:
    """One ImageNet-like JPEG; its bytes depend only on the generator state and the scale.

    Random crop of a source photo -> resize to an ImageNet-like size -> colour jitter ->
    unsharp mask -> sensor-like noise of strength ~``noise_scale`` -> JPEG.
    """
    photos = load_photos()
    weights = np.array([p.weight for p in photos])
    photo = photos[int(rng.choice(len(photos), p=weights / weights.sum()))]
    src_h, src_w = photo.pixels.shape[:2]
    w, h = sample_size(rng)

    # Crop with the output aspect ratio covering 35-100 % of the source, then resize.
    aspect = w / h
    area = rng.uniform(0.35, 1.0) * src_h * src_w
    cw = min(src_w, int(np.sqrt(area * aspect)))
    ch = min(src_h, int(cw / aspect))
    cw = min(src_w, int(ch * aspect))
    x0, y0 = int(rng.integers(0, src_w - cw + 1)), int(rng.integers(0, src_h - ch + 1))
    crop = photo.pixels[y0 : y0 + ch, x0 : x0 + cw]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    interp = cv2.INTER_CUBIC if w > cw else cv2.INTER_AREA
    img = cv2.resize(np.ascontiguousarray(crop), (w, h), interpolation=interp)

    # Brightness, contrast, saturation and white balance are all linear in RGB, so they
    # collapse into one 3x4 affine map applied in a single pass.
    b, c, s = rng.uniform(0.85, 1.15), rng.uniform(0.85, 1.15), rng.uniform(0.8, 1.2)
    gains = rng.uniform(0.92, 1.08, 3)
    if photo.grayscale:  # tint grey textures so they are not grey images
        gains *= (rng.uniform(0.6, 1.0), rng.uniform(0.7, 1.1), rng.uniform(0.4, 0.9))
    mean = round(float(img.mean()), 3) * b
    linear = c * b * (s * np.eye(3) + (1 - s) * np.outer(np.ones(3), _LUMA))
    affine = np.hstack([gains[:, None] * linear, (gains * (1 - c) * mean)[:, None]])
    a = cv2.transform(img.astype(np.float32), affine.astype(np.float32))

    # Unsharp mask restores detail lost to upscaling small sources.
    k = rng.uniform(0.4, 1.2)
    # float32 still (cv2 keeps its inputs' depth), which cv2's stubs cannot say: any numeric dtype
    a = cast("npt.NDArray[np.float32]", cv2.addWeighted(a, 1 + k, cv2.GaussianBlur(a, (0, 0), 1.5), -k, 0))

    sigma = noise_scale * rng.uniform(0.5, 1.5)
    bank = noise_bank()
    ny, nx = int(rng.integers(0, bank.shape[0] - h + 1)), int(rng.integers(0, bank.shape[1] - w + 1))
    a += np.float32(sigma) * bank[ny : ny + h, nx : nx + w]
    np.clip(a, 0, 255, out=a)

    # Flickr-like: quality 75-95 skewed high; 4:2:0 mostly, 4:4:4 for ~30 %.
    quality = int(np.clip(round(95 - abs(rng.normal(0, 6))), 75, 95))
    subsampling = 0 if rng.random() < 0.3 else 2
    buf = io.BytesIO()
    Image.fromarray(a.astype(np.uint8)).save(
        buf, "JPEG", quality=quality, subsampling=subsampling, optimize=False
    )
    return buf.getvalue()
