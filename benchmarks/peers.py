"""Peer loaders on our shards, doing exactly our decode + augment work per sample.

Each adapter returns an iterable of (images, labels) batches. Peers that need their own format get
a real conversion of the same samples (litdata's optimize), never a fake.
"""
# SPDL (Meta's thread-pool pipelines, ``pip install spdl``) is the one peer of threads, not processes

from __future__ import annotations

import functools
import multiprocessing
import random
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from loaders.formats.tar import iter_samples
from loaders.pipeline.decode import AugmentSpec, augment, collate_images, decode_jpeg

SPEC = AugmentSpec()


def decode_augment(jpg: bytes, rng: random.Random) -> np.ndarray:
    return augment(decode_jpeg(jpg), rng, SPEC)


def collate(pairs: list[tuple[np.ndarray, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    return collate_images([p[0] for p in pairs]), torch.tensor([p[1] for p in pairs], dtype=torch.int64)


def _one_thread(_: int) -> None:
    torch.set_num_threads(1)


class _DecodePair:
    """Picklable (workers may be spawned): decode + augment one (jpg, cls) pair."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def __call__(self, sample: tuple[bytes, bytes]) -> tuple[np.ndarray, int]:
        return decode_augment(sample[0], self.rng), int(sample[1])


def webdataset_loader(urls: list[str], workers: int, batch: int) -> Iterable:
    import webdataset as wds

    ds = (
        wds.WebDataset(urls, shardshuffle=False, empty_check=False)
        .to_tuple("jpg", "cls")
        .map(_DecodePair())
        .batched(batch, collation_fn=collate, partial=True)
    )
    return wds.WebLoader(ds, batch_size=None, num_workers=workers, worker_init_fn=_one_thread)


def shard_samples(path: str):
    """A tar shard's samples as {jpg: bytes, cls: int}, the rows both peer formats are written from."""
    with open(path, "rb") as f:
        for s in iter_samples(f, path):
            yield {"jpg": s.parts["jpg"], "cls": int(s.parts["cls"])}


def _litdata():
    """litdata, or an ImportError that says how to install it beside the user's torch."""
    try:
        import litdata
    except ImportError as exc:
        raise ImportError(
            "the litdata peer needs litdata, which iobench[peers] leaves out (it requires torchvision, "
            f"which would replace your torch): pip install --no-deps 'litdata>=0.2' ({exc})"
        ) from exc
    return litdata


def _optimize(urls: list[str], out_dir: Path) -> None:
    litdata = _litdata()

    litdata.optimize(
        fn=shard_samples, inputs=urls, output_dir=str(out_dir), chunk_bytes="64MB", num_workers=1
    )


def litdata_convert(urls: list[str], out_dir: Path) -> Path:
    """litdata's own chunked format, written by its optimize() from the same samples.

    In a child process: optimize() switches the process's multiprocessing start method to spawn for
    good, which would change how every later loader in the benchmark starts its workers.
    """
    if not (out_dir / "index.json").exists():
        child = multiprocessing.get_context("fork").Process(target=_optimize, args=(urls, out_dir))
        child.start()
        child.join()
        if child.exitcode:
            raise RuntimeError(f"litdata.optimize failed (exit code {child.exitcode})")
    return out_dir


@functools.cache
def _decoded_class() -> type:
    litdata = _litdata()

    class DecodedStreamingDataset(litdata.StreamingDataset):
        rng = random.Random(0)

        def __getitem__(self, index):
            sample = super().__getitem__(index)
            return decode_augment(sample["jpg"], self.rng), sample["cls"]

    DecodedStreamingDataset.__qualname__ = "DecodedStreamingDataset"
    return DecodedStreamingDataset


def __getattr__(name: str) -> type:
    # pickle finds the class by name here, in any process (the class needs litdata, imported late)
    if name == "DecodedStreamingDataset":
        return _decoded_class()
    raise AttributeError(name)


def litdata_loader(data_dir: Path, workers: int, batch: int) -> Iterable:
    litdata = _litdata()

    ds = _decoded_class()(input_dir=str(data_dir))
    return litdata.StreamingDataLoader(
        ds, batch_size=batch, num_workers=workers, collate_fn=collate, worker_init_fn=_one_thread
    )


class SpdlLoader:
    """SPDL's pipeline as its documentation builds one: a source of (jpg, cls) pairs, the decode +
    augment stage on ``workers`` threads (``concurrency``), ``aggregate`` into batches, collate. SPDL
    has no tar reader of its own, so its source reads the shards with ours (``shard_samples``: the
    members as bytes, the same reading every peer's format was written from). One epoch per
    iteration, the pipeline started and stopped with it."""

    def __init__(self, urls: list[str], workers: int, batch: int) -> None:
        from spdl.pipeline import PipelineBuilder

        torch.set_num_threads(1)  # the decode threads are the parallelism, as in every other contender
        self.urls, self.workers, self.batch = urls, workers, batch
        self.builder = PipelineBuilder

    def _pairs(self):
        for url in self.urls:
            for sample in shard_samples(url):
                yield sample["jpg"], sample["cls"]

    def __iter__(self):
        decode = _DecodePair()
        pipeline = (
            self.builder()
            .add_source(self._pairs())
            .pipe(decode, concurrency=self.workers)
            .aggregate(self.batch)
            .pipe(collate)
            .add_sink(3)
            .build(num_threads=self.workers)
        )
        with pipeline.auto_stop():
            yield from pipeline.get_iterator()


def spdl_loader(urls: list[str], workers: int, batch: int) -> Iterable:
    return SpdlLoader(urls, workers, batch)
