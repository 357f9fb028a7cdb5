"""The crop box decoded alone is the whole decode's box: over many image sizes, boxes, baseline and
progressive JPEGs, 4:2:0, 4:2:2 and 4:4:4 chroma, greyscale and CMYK, and through the resize and
flip into the batch."""

from __future__ import annotations

import io
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from loaders.config import AugmentSpec
from loaders.pipeline import decoders
from loaders.pipeline.cropdecode import decode_crop
from loaders.pipeline.decode import CorruptImage, crop_box, decode_jpeg, resize_flip
from loaders.pipeline.decoders import decoder_name, region_decode_available

SPEC = AugmentSpec()
# PIL's subsampling codes: 0 = 4:4:4, 1 = 4:2:2, 2 = 4:2:0
CHROMA = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}

needs_region_decoder = pytest.mark.skipif(
    not region_decode_available() and not os.environ.get("CI"),
    reason="the region decoder was not built (no libjpeg-turbo headers at install time)",
)


def jpeg(
    width: int, height: int, mode: str, chroma: str, progressive: bool, seed: int, quality: int = 90
) -> bytes:
    """A photo-like JPEG: smooth gradients (long runs for the entropy coder) under noise (detail)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    base = (xx * 255 // max(1, width - 1) + yy * 255 // max(1, height - 1)) // 2
    channels = {"L": 1, "RGB": 3, "CMYK": 4}[mode]
    pixels = np.stack([(base + 60 * c) % 256 for c in range(channels)], axis=-1)
    pixels = np.clip(pixels + rng.normal(0, 25, pixels.shape), 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels[..., 0] if mode == "L" else pixels, mode)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=quality, subsampling=CHROMA[chroma], progressive=progressive)
    return out.getvalue()


images = st.builds(
    jpeg,
    width=st.integers(1, 200),
    height=st.integers(1, 200),
    mode=st.sampled_from(["RGB", "RGB", "L", "CMYK"]),
    chroma=st.sampled_from(list(CHROMA)),
    progressive=st.booleans(),
    seed=st.integers(0, 2**16),
    quality=st.integers(50, 98),
)


def whole_then_crop(data: bytes, seed: int) -> np.ndarray:
    return crop_box(decode_jpeg(data), random.Random(seed), SPEC)


def within_one_level(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and int(np.abs(a.astype(np.int16) - b).max(initial=0)) <= 1


def test_the_region_decoder_is_built_in_ci():
    """CI installs libjpeg-turbo's headers (.ci/run): there the extension must have been built."""
    if os.environ.get("CI"):
        assert region_decode_available()


@needs_region_decoder
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=images, seeds=st.lists(st.integers(0, 2**32), min_size=1, max_size=6))
def test_the_crop_box_decoded_alone_is_the_whole_decodes_box(data, seeds):
    for seed in seeds:
        alone = decode_crop(data, random.Random(seed), SPEC, roi=True)
        assert within_one_level(alone, whole_then_crop(data, seed))


@needs_region_decoder
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=images, seed=st.integers(0, 2**32))
def test_the_batch_image_is_the_same_with_and_without_region_decode(data, seed):
    """Resized and flipped into the batch, from the same generator: the same image (the flip's draw
    follows the box's in both paths)."""
    made = []
    for roi in (True, False):
        rng = random.Random(seed)
        made.append(resize_flip(decode_crop(data, rng, SPEC, roi=roi), rng, SPEC))
    assert within_one_level(*made)


@needs_region_decoder
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_box_decoded_alone_is_the_whole_decodes_box(data):
    """Boxes at every edge and of every size, 1 x 1 to the whole image, not only RandomResizedCrop's."""
    width, height = data.draw(st.integers(1, 180)), data.draw(st.integers(1, 180))
    chroma, progressive = data.draw(st.sampled_from(list(CHROMA))), data.draw(st.booleans())
    mode = data.draw(st.sampled_from(["RGB", "L"]))
    encoded = jpeg(width, height, mode, chroma, progressive, data.draw(st.integers(0, 99)))
    x, y = data.draw(st.integers(0, width - 1)), data.draw(st.integers(0, height - 1))
    w, h = data.draw(st.integers(1, width - x)), data.draw(st.integers(1, height - y))
    out = np.empty((h, w + 32, 3), np.uint8)
    left, decoded_width = decoders.region_decoder.decode_crop(encoded, x, y, w, h, out)
    assert left <= x and left + decoded_width >= x + w and x - left < 32
    whole = decode_jpeg(encoded)
    assert within_one_level(out[:, x - left : x - left + w], whole[y : y + h, x : x + w])


@needs_region_decoder
def test_a_box_outside_the_image_or_a_short_buffer_is_refused():
    encoded = jpeg(64, 48, "RGB", "4:2:0", False, 0)
    for x, y, w, h in [(0, 0, 65, 48), (10, 0, 60, 10), (0, 40, 8, 9), (-1, 0, 4, 4), (0, 0, 0, 4)]:
        with pytest.raises(ValueError, match="not inside the image"):
            decoders.region_decoder.decode_crop(
                encoded, x, y, w, h, np.empty((max(h, 1), w + 32, 3), np.uint8)
            )
    with pytest.raises(ValueError, match="smaller than"):
        decoders.region_decoder.decode_crop(encoded, 0, 0, 16, 16, np.empty((15, 48, 3), np.uint8))


@needs_region_decoder
def test_a_truncated_jpeg_takes_the_whole_image_path_and_its_error():
    """What libjpeg-turbo refuses (a warning included) goes to the whole-image path, which decodes
    it or raises its own CorruptImage: region decode refuses nothing the whole path takes."""
    encoded = jpeg(120, 90, "RGB", "4:2:0", False, 1)
    for cut in (len(encoded) // 3, len(encoded) - 2):
        data = encoded[:cut]
        try:
            expected = whole_then_crop(data, 5)
        except CorruptImage:
            with pytest.raises(CorruptImage):
                decode_crop(data, random.Random(5), SPEC, roi=True)
        else:
            assert within_one_level(decode_crop(data, random.Random(5), SPEC, roi=True), expected)
    with pytest.raises(CorruptImage):
        decode_crop(b"\xff\xd8 not a jpeg", random.Random(0), SPEC, roi=True)


def test_without_the_region_decoder_the_whole_image_is_decoded(monkeypatch):
    monkeypatch.setattr(decoders, "region_decoder", None)
    data = jpeg(80, 60, "RGB", "4:2:0", False, 2)
    assert not region_decode_available()
    assert np.array_equal(decode_crop(data, random.Random(3), SPEC, roi=True), whole_then_crop(data, 3))
    assert decoder_name(True) == decoder_name(False) and "whole-image" in decoder_name(True)


@needs_region_decoder
def test_the_decoder_is_named_with_its_library_and_what_it_decodes():
    assert decoder_name(True).startswith("libjpeg-turbo ") and "crop-region" in decoder_name(True)
    assert decoder_name(False).startswith("simplejpeg ") and "whole-image" in decoder_name(False)
