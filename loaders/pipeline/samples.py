"""The backend-neutral sample pipeline: shards -> samples -> shuffle -> decode/augment -> batches.
With ``decode=False`` the samples are read in full and batched as byte lengths, undecoded.

Every loader backend (DataLoader workers, torchdata.nodes, ...) runs these same steps, so a sweep
compares backends rather than accidental differences in the work done.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import TypeVar

import numpy as np

from loaders.config import PipelineSpec
from loaders.formats.tar import Sample, iter_samples
from loaders.formats.tar_index import ShardIndexError, byte_range, iter_range_samples, load_index
from loaders.observe.stages import StageStats, Stopwatch, clocks, since
from loaders.pipeline.assemble import Batch, BatchAssembler
from loaders.pipeline.decode import CorruptImage, augment, decode_jpeg
from loaders.pipeline.shmring import ShmRing
from loaders.plan import Part
from loaders.storage.sources import ShardSource

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")
LABEL_EXTS = ("cls", "label", "class")

T = TypeVar("T")


class SampleError(ValueError):
    """A sample that cannot be used (corrupt image, missing label); names shard and key."""


def _samples_of(raw, url: str, spec: PipelineSpec, rows: tuple[int, int] | None = None) -> Iterator[Sample]:
    """The shard format follows the name: Parquet for ``.parquet``, WebDataset tar otherwise."""
    if url.endswith(".parquet"):
        from loaders.formats.parquet import iter_parquet_samples  # pyarrow loads only for Parquet shards

        return iter_parquet_samples(raw, url, rows=rows)
    return iter_samples(raw, url, spec.max_member_bytes)


def read_shards(urls: Iterable[str | Part], source: ShardSource, spec: PipelineSpec) -> Iterator[Sample]:
    """Stream the samples of each shard in turn; opening the shard counts as fetch time. A
    :class:`Part` reads only its samples: a ranged one reads only their bytes (:func:`_ranged`);
    otherwise those before it are read but not yielded (their bytes and time are charged to its
    first sample), and reading stops after its last."""
    for item in urls:
        if isinstance(item, Part) and item.ranged:
            yield from _ranged(item, source, spec)
            continue
        url = item.url if isinstance(item, Part) else item
        start = clocks()
        with source.open(url) as raw:
            opened_wall, opened_cpu = since(start)
            samples = _samples_of(raw, url, spec)
            if isinstance(item, Part):
                samples = _part_of(samples, item)
            yield from _charged(samples, opened_wall, opened_cpu)


def _ranged(part: Part, source: ShardSource, spec: PipelineSpec) -> Iterator[Sample]:
    """A part of a shard that most readers share: a tar's members by byte range from the shard's
    index (read, and charged, with the part's first sample), a Parquet file's row groups."""
    if part.stop <= part.start:
        return
    start = clocks()
    if part.url.endswith(".parquet"):
        with source.open(part.url) as raw:
            opened_wall, opened_cpu = since(start)
            yield from _charged(
                _samples_of(raw, part.url, spec, (part.start, part.stop)), opened_wall, opened_cpu
            )
        return
    index = load_index(part.url, source.read_object)
    begin, end = byte_range(index, part.url, part.start, part.stop)
    size = source.spec.shard_sizes.get(part.url)
    if size is not None and end > size:
        raise ShardIndexError(
            part.url, f"its index places members up to byte {end}, but the shard has {size} (stale index)"
        )
    with source.open(part.url, begin, end) as raw:
        opened_wall, opened_cpu = since(start)
        samples = iter_range_samples(raw, part.url, index, part.start, part.stop, spec.max_member_bytes)
        yield from _charged(samples, opened_wall, opened_cpu)


def _charged(samples: Iterator[Sample], wall: float, cpu: float) -> Iterator[Sample]:
    """The samples, the first one charged the time it took to open the shard."""
    for sample in samples:
        sample.fetch_wall_s += wall
        sample.fetch_cpu_s += cpu
        wall = cpu = 0.0
        yield sample


def _part_of(samples: Iterator[Sample], part: Part) -> Iterator[Sample]:
    if part.stop <= part.start:
        return
    carried = [0, 0.0, 0.0]
    for i, sample in enumerate(samples):
        if i < part.start:  # another reader's: the bytes came off the storage all the same
            carried[0] += sample.read_bytes
            carried[1] += sample.fetch_wall_s
            carried[2] += sample.fetch_cpu_s
            continue
        sample.read_bytes += int(carried[0])
        sample.fetch_wall_s += carried[1]
        sample.fetch_cpu_s += carried[2]
        carried = [0, 0.0, 0.0]
        yield sample
        if i + 1 >= part.stop:
            return  # the rest of the shard is another reader's: not even read


def shuffled(samples: Iterable[T], size: int, rng: random.Random, initial: int | None = None) -> Iterator[T]:
    """A bounded shuffle buffer: memory stays at ``size`` samples whatever the dataset size.

    It starts yielding once it holds ``initial`` samples (default an eighth of ``size``) and reads
    two samples per sample yielded until it is full, as webdataset's does: a reader's first batch
    (at start-up and at every epoch) waits for a fraction of the buffer, not all of it.
    """
    if size <= 1:
        yield from samples
        return
    initial = max(1, size // 8) if initial is None else max(1, min(initial, size))
    buffer: list[T] = []
    source = iter(samples)
    for sample in source:
        buffer.append(sample)
        if len(buffer) < size:  # still filling: one more read for this yield
            more = next(source, _NOTHING)
            if more is not _NOTHING:
                buffer.append(more)  # type: ignore[arg-type]
        if len(buffer) >= initial:
            i = rng.randrange(len(buffer))
            buffer[i], buffer[-1] = buffer[-1], buffer[i]
            yield buffer.pop()
    rng.shuffle(buffer)
    yield from buffer


_NOTHING = object()


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
    raise SampleError(f"{sample.url}: sample {sample.key!r} has no label (.cls) member")


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
    errors to ``stats``. Under ``spec.decode=False`` the image's byte length takes the image's
    place: its bytes were read (and counted) all the same, and no decode or augment time accrues.

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
        with Stopwatch(stats, "decode"):
            try:
                image = decode_jpeg(data)
            except CorruptImage as exc:
                raise SampleError(
                    f"{sample.url}: sample {sample.key!r} (tar offset {sample.offset}): {exc}"
                ) from None
        with Stopwatch(stats, "augment"):
            image = augment(image, rng, spec.augment, out)
    except SampleError as exc:
        if spec.on_error == "fail":
            raise
        kind = "missing_label" if "no label" in str(exc) else "corrupt_sample"
        stats.add_error(kind, str(exc))
        return None
    stats.samples += 1
    return image, label, sample.key


def batches(
    samples: Iterable[Sample],
    spec: PipelineSpec,
    rng: random.Random,
    drain: Callable[[StageStats], None] | None = None,
    *,
    start: StageStats | None = None,
    shared: bool = False,
    ring: ShmRing | None = None,
    reader: int = 0,
) -> Iterator[Batch]:
    """Decode, augment and collate; errors are counted per the policy and never sleep or retry.

    ``drain`` moves the storage counters gathered meanwhile (requests, cache) into each batch;
    ``start`` is the first batch's stats (it receives what a resume skipped). ``shared`` puts the
    batch buffers in shared memory (a DataLoader worker sends them to another process): in reader
    ``reader``'s slots of ``ring`` when given.
    """
    base = rng.getrandbits(64)
    batch = BatchAssembler(
        spec.batch_size, spec.image_size, shared=shared, stats=start, ring=ring, ring_owner=reader
    )
    reads: list[tuple[float, float]] = []  # each sample's read: when asked for, when its bytes were in
    for sample in samples:
        batch.consumed += 1
        if sample.read is not None:
            reads.append(sample.read)
        slot = batch.slot() if spec.decode else None
        out = process_sample(sample, spec, sample_rng(base, sample), batch.stats, slot)
        if out is None:
            continue
        if spec.decode:
            batch.commit(out[1], out[2])  # the image is already in its slot
        else:
            batch.add(*out)
        if batch.full:
            if drain:
                drain(batch.stats)
            full = batch.take()
            assert full is not None
            full.reads, reads = tuple(reads) or None, []
            yield full
    if drain:
        drain(batch.stats)
    tail = batch.take(drop_partial=spec.drop_last)
    if tail is not None:
        tail.reads = tuple(reads) or None
        yield tail


def raw_samples(
    items: Sequence,
    source: ShardSource,
    spec: PipelineSpec,
    rng: random.Random,
    *,
    objects: bool = False,
    skip: int = 0,
    skipped: StageStats | None = None,
) -> Iterator[Sample]:
    """One reader's samples in shuffled order, less the first ``skip`` (already delivered before a
    resume). Skipped shard samples are read (the shuffle buffer needs them) but never decoded;
    skipped objects are not even fetched, because objects are shuffled as (key, url, label) before
    their bytes are read. ``skipped`` receives what the skip cost.

    Draws from ``rng`` now, not lazily, so the caller's later draws are the same on every backend.
    """
    shuffle_rng = random.Random(rng.getrandbits(64))
    skipped = skipped if skipped is not None else StageStats()
    if objects:
        from loaders.formats.sample_objects import read_objects

        order = list(shuffled(items, spec.shuffle_buffer, shuffle_rng))
        if skip:
            skipped.counters["resume_skipped_samples"] += min(skip, len(order))
        return read_objects(order[skip:], source, concurrency=source.spec.concurrency)
    samples = shuffled(read_shards(items, source, spec), spec.shuffle_buffer, shuffle_rng)
    return _skipping(samples, skip, skipped) if skip else samples


def _skipping(samples: Iterator[Sample], n: int, skipped: StageStats) -> Iterator[Sample]:
    for sample in islice(samples, n):
        # the bytes really came off the storage: count them, but as no delivered sample
        skipped.bytes_read += sample.read_bytes
        skipped.add_time("fetch", sample.fetch_wall_s, sample.fetch_cpu_s)
        skipped.counters["resume_skipped_samples"] += 1
    yield from samples


def _while(samples: Iterator[Sample], alive: Callable[[], bool]) -> Iterator[Sample]:
    for sample in samples:
        if not alive():
            return
        yield sample


def stream(
    items: Sequence,
    source: ShardSource,
    spec: PipelineSpec,
    rng: random.Random,
    *,
    objects: bool = False,
    skip: int = 0,
    shared: bool = False,
    ring: ShmRing | None = None,
    reader: int = 0,
    alive: Callable[[], bool] | None = None,
) -> Iterator[Batch]:
    """The whole pipeline for one reader (a worker, a thread, or the main process).

    ``items`` are shard URLs (or :class:`Part` s of shards), or with ``objects=True`` (key, url,
    label) of one object per sample. ``skip`` drops the first samples of the reader's shuffled
    stream without decoding them (resume); ``shared`` allocates batches in shared memory (for a
    DataLoader worker), in reader ``reader``'s slots of ``ring`` while it has free ones. The
    stream ends early, at the next sample, once ``alive()`` turns false.
    """
    first = StageStats()
    raw = raw_samples(items, source, spec, rng, objects=objects, skip=skip, skipped=first)
    if alive is not None:
        raw = _while(raw, alive)
    return batches(
        raw, spec, rng, drain=source.drain_into, start=first, shared=shared, ring=ring, reader=reader
    )
