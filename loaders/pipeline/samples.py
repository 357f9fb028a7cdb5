"""One sample's work, the same in every backend: its label and image found among its members, then
its crop box decoded (alone where it can be: loaders.pipeline.cropdecode), resized and flipped
(into a batch slot when one is given) under the error policy. With
``decode=False`` the image's byte length takes the image's place: its bytes were read (and counted)
all the same, and no decode or augment time accrues.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from loaders.config import PipelineSpec
from loaders.formats.base import Ref, Sample
from loaders.observe.stages import StageStats, Stopwatch
from loaders.pipeline.cropdecode import decode_crop
from loaders.pipeline.decode import CorruptImage, resize_flip, spend_cpu

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")
LABEL_EXTS = ("cls", "label", "class")


class SampleError(ValueError):
    """A sample that cannot be used (corrupt image, missing label); names shard and key. ``kind``
    is the error counter it goes to under ``on_error="skip"``."""

    def __init__(self, message: str, kind: str = "corrupt_sample") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Decoded:
    """A sample decoded and augmented away from its batch (a mapper thread), with what it cost:
    ``out`` is (image or byte length, label, key), None for a sample skipped under the policy;
    ``stats`` the counters it carries to the batch it goes into."""

    out: tuple[np.ndarray | int, int, str] | None
    stats: StageStats
    ref: Ref
    read: tuple[float, float] | None


def label_of(sample: Sample) -> int:
    for ext in LABEL_EXTS:
        if ext in sample.parts:
            text = sample.parts[ext].strip()
            try:
                return int(text)
            except ValueError:
                raise SampleError(
                    f"{sample.url}: sample {sample.key!r} has a non-integer label {text[:20]!r}"
                ) from None
    raise SampleError(f"{sample.url}: sample {sample.key!r} has no label (.cls) member", "missing_label")


def image_of(sample: Sample) -> bytes:
    for ext in IMAGE_EXTS:
        if ext in sample.parts:
            return sample.parts[ext]
    raise SampleError(
        f"{sample.url}: sample {sample.key!r} has no image member (found: {sorted(sample.parts)})"
    )


def sample_rng(base: int, sample: Sample) -> random.Random:
    """The augmentation draws of one sample depend on (reader seed, shard, key) only, not on the order
    in which threads or workers reach it: a resumed epoch, or a thread pool, crops exactly alike."""
    return random.Random(f"{base}:{sample.url}:{sample.key}")


def process_sample(
    sample: Sample, spec: PipelineSpec, rng: random.Random, stats: StageStats, out: np.ndarray | None = None
) -> tuple[np.ndarray | int, int, str] | None:
    """Decode and augment one sample (into ``out`` when given), adding its bytes, stage times and
    errors to ``stats``.

    Returns ``None`` for a sample skipped under ``on_error="skip"``; raises :class:`SampleError`
    under ``"fail"``. Errors never sleep or retry.
    """
    stats.bytes_read += sample.read_bytes
    stats.add_time("fetch", sample.fetch_wall_s, sample.fetch_cpu_s)
    try:
        label = label_of(sample)
        data = image_of(sample)
        if not spec.decode:
            stats.samples += 1
            return len(data), label, sample.key
        with Stopwatch(stats, "decode"):  # the crop box drawn, then decoded (alone where it can be)
            try:
                crop = decode_crop(data, rng, spec.augment, spec.decode_roi)
                if spec.decode_cpu_ms:
                    spend_cpu(spec.decode_cpu_ms / 1000.0)
            except CorruptImage as exc:
                raise SampleError(
                    f"{sample.url}: sample {sample.key!r} (tar offset {sample.offset}): {exc}"
                ) from None
        with Stopwatch(stats, "augment"):
            image = resize_flip(crop, rng, spec.augment, out)
            if spec.augment_cpu_ms:
                spend_cpu(spec.augment_cpu_ms / 1000.0)
    except SampleError as exc:
        if spec.on_error == "fail":
            raise
        stats.add_error(exc.kind, str(exc))
        return None
    stats.samples += 1
    return image, label, sample.key
