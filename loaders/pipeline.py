"""The backend-neutral sample pipeline: shards -> samples -> shuffle -> decode/augment -> batches.

Every loader backend (DataLoader workers, torchdata.nodes, ...) runs these same steps, so a sweep
compares backends rather than accidental differences in the work done.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .decode import AugmentSpec, CorruptImage, augment, collate_images, decode_jpeg
from .instrument import StageStats, Stopwatch
from .sources import ShardSource
from .tario import DEFAULT_MAX_MEMBER_BYTES, Sample, iter_samples

ERROR_POLICIES = ("skip", "fail")
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")
LABEL_EXTS = ("cls", "label", "class")


class SampleError(ValueError):
    """A sample that cannot be used (corrupt image, missing label); names shard and key."""


@dataclass
class Batch:
    """What every loader backend yields: images N x 3 x H x W uint8 (channels_last), labels int64."""

    images: torch.Tensor | None
    labels: torch.Tensor | None
    keys: list[str] = field(default_factory=list)
    stats: StageStats = field(default_factory=StageStats)

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class PipelineSpec:
    batch_size: int = 64
    shuffle_buffer: int = 1000
    seed: int = 0
    augment: AugmentSpec = field(default_factory=AugmentSpec)
    on_error: str = "skip"
    drop_last: bool = False
    max_member_bytes: int = DEFAULT_MAX_MEMBER_BYTES

    def __post_init__(self) -> None:
        if self.on_error not in ERROR_POLICIES:
            raise ValueError(f"on_error={self.on_error!r}: allowed values are {', '.join(ERROR_POLICIES)}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size}: must be at least 1")


def read_shards(urls: Iterable[str], source: ShardSource, spec: PipelineSpec) -> Iterator[Sample]:
    """Stream the samples of each shard in turn; opening the shard counts as fetch time."""
    for url in urls:
        t0 = time.perf_counter()
        c0 = time.thread_time()
        with source.open(url) as raw:
            opened_wall, opened_cpu = time.perf_counter() - t0, time.thread_time() - c0
            for sample in iter_samples(raw, url, spec.max_member_bytes):
                sample.fetch_wall_s += opened_wall
                sample.fetch_cpu_s += opened_cpu
                opened_wall = opened_cpu = 0.0
                yield sample


def shuffled(samples: Iterable[Sample], size: int, rng: random.Random) -> Iterator[Sample]:
    """A bounded shuffle buffer: memory stays at ``size`` samples whatever the dataset size."""
    if size <= 1:
        yield from samples
        return
    buffer: list[Sample] = []
    for sample in samples:
        if len(buffer) < size:
            buffer.append(sample)
            continue
        i = rng.randrange(size)
        buffer[i], sample = sample, buffer[i]
        yield sample
    rng.shuffle(buffer)
    yield from buffer


def _label_of(sample: Sample) -> int:
    for ext in LABEL_EXTS:
        if ext in sample.parts:
            text = sample.parts[ext].strip()
            try:
                return int(text)
            except ValueError:
                raise SampleError(
                    f"{sample.url}: sample {sample.key!r} has a non-integer label {text[:20]!r}"
                ) from None
    raise SampleError(f"{sample.url}: sample {sample.key!r} has no label (.cls) member")


def _image_of(sample: Sample) -> bytes:
    for ext in IMAGE_EXTS:
        if ext in sample.parts:
            return sample.parts[ext]
    raise SampleError(
        f"{sample.url}: sample {sample.key!r} has no image member (found: {sorted(sample.parts)})"
    )


def batches(
    samples: Iterable[Sample],
    spec: PipelineSpec,
    rng: random.Random,
    drain: Callable[[StageStats], None] | None = None,
) -> Iterator[Batch]:
    """Decode, augment and collate; errors are counted per the policy and never sleep or retry.

    ``drain`` moves the storage counters gathered meanwhile (requests, cache) into each batch.
    """
    stats = StageStats()
    images: list[np.ndarray] = []
    labels: list[int] = []
    keys: list[str] = []
    for sample in samples:
        stats.bytes_read += sample.read_bytes
        stats.add_time("fetch", sample.fetch_wall_s, sample.fetch_cpu_s)
        try:
            label = _label_of(sample)
            data = _image_of(sample)
            with Stopwatch(stats, "decode"):
                try:
                    image = decode_jpeg(data)
                except CorruptImage as exc:
                    raise SampleError(
                        f"{sample.url}: sample {sample.key!r} (tar offset {sample.offset}): {exc}"
                    ) from None
            with Stopwatch(stats, "augment"):
                image = augment(image, rng, spec.augment)
        except SampleError as exc:
            if spec.on_error == "fail":
                raise
            kind = "missing_label" if "no label" in str(exc) else "corrupt_sample"
            stats.add_error(kind, str(exc))
            continue
        images.append(image)
        labels.append(label)
        keys.append(sample.key)
        stats.samples += 1
        if len(images) == spec.batch_size:
            if drain:
                drain(stats)
            yield _collate(images, labels, keys, stats)
            stats, images, labels, keys = StageStats(), [], [], []
    if drain:
        drain(stats)
    if images and not spec.drop_last:
        yield _collate(images, labels, keys, stats)
        return
    stats.samples -= len(images)  # a dropped tail was decoded but is not delivered
    if stats.errors or stats.bytes_read or stats.counters:
        # the tail's counters must still reach the consumer, or errors and bytes go missing
        yield Batch(images=None, labels=None, keys=[], stats=stats)


def _collate(images: list[np.ndarray], labels: list[int], keys: list[str], stats: StageStats) -> Batch:
    with Stopwatch(stats, "collate"):
        tensor = collate_images(images)
        label_tensor = torch.tensor(labels, dtype=torch.int64)
    return Batch(images=tensor, labels=label_tensor, keys=keys, stats=stats)


def stream(
    items: Sequence, source: ShardSource, spec: PipelineSpec, rng: random.Random, *, objects: bool = False
) -> Iterator[Batch]:
    """The whole pipeline for one reader (a worker, a thread, or the main process).

    ``items`` are shard URLs, or with ``objects=True`` (key, url, label) of one object per sample.
    """
    if objects:
        from .objects import read_objects

        raw = read_objects(items, source, concurrency=source.spec.concurrency)
    else:
        raw = read_shards(items, source, spec)
    return batches(shuffled(raw, spec.shuffle_buffer, rng), spec, rng, drain=source.drain_into)
