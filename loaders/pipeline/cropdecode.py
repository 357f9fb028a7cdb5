"""Decode only what the crop keeps: the random-resized-crop box is drawn first, from the image's
size in its header, then only that box is decoded.

A random-resized crop keeps about half of an image on average, yet a whole decode pays for every
pixel's inverse DCT, upsampling and colour conversion, and entropy-decodes the file to its end.
The region decoder (``_cropdecode.c``, libjpeg-turbo's partial decompression) entropy-decodes only
the rows down to the box's last one, and runs the pixel stages only for the iMCU rows and columns
that hold the box. Its settings are the whole-image path's (fast DCT, fast upsampling), so the box's
pixels are those of the whole decode and the batch is the same; a sample's box is drawn from the
same generator, in the same order, as the whole-image path draws it.

The whole-image path stays where the region decoder cannot go: the extension was not built (no
libjpeg-turbo headers at install time), CMYK and YCCK JPEGs (libjpeg-turbo has no RGB output for
them; PIL converts them), anything libjpeg-turbo refuses (PIL may still read it), and non-JPEG
images.
"""

from __future__ import annotations

import random

import numpy as np
import simplejpeg

from loaders.config import AugmentSpec
from loaders.pipeline import decoders
from loaders.pipeline.decode import MAX_PIXELS, CorruptImage, crop_box, decode_jpeg, random_resized_crop_box

# libjpeg-turbo gives no RGB for these: PIL converts them, from the whole image
_NOT_RGB = ("CMYK", "YCCK")
# columns out has beyond the box: the decoded columns start at most an iMCU (32 pixels) left of it
_SPARE_COLUMNS = 32


def decode_crop(data: bytes, rng: random.Random, spec: AugmentSpec, roi: bool = True) -> np.ndarray:
    """The random-resized-crop box of the image in ``data`` (drawn from ``rng``), decoded: H x W x 3
    uint8 RGB, a view. ``roi``: decode the box alone where the region decoder can; else (and for
    any image it cannot take) decode the whole image and take the box from it, the same pixels."""
    if not roi or decoders.region_decoder is None:
        return crop_box(decode_jpeg(data), rng, spec)
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:  # not a JPEG libjpeg-turbo reads (PNG, WebP, corrupt): the whole-image path
        return crop_box(decode_jpeg(data), rng, spec)
    if height * width > MAX_PIXELS or colorspace in _NOT_RGB:
        return crop_box(decode_jpeg(data), rng, spec)  # the bomb's error, or PIL's conversion
    x, y, w, h = random_resized_crop_box(rng, width, height, spec)
    out = np.empty((h, w + _SPARE_COLUMNS, 3), np.uint8)
    try:
        left, _ = decoders.region_decoder.decode_crop(data, x, y, w, h, out)
    except (ValueError, NotImplementedError):
        # what libjpeg-turbo refuses, the whole-image path decodes (PIL) or refuses in its own words
        image = decode_jpeg(data)
        if image.shape[:2] != (height, width):
            raise CorruptImage(
                f"its header says {width} x {height} pixels, its image is {image.shape[1]} x {image.shape[0]}"
            ) from None
        return image[y : y + h, x : x + w]
    return out[:, x - left : x - left + w]
