"""The backend-neutral sample pipeline: samples -> shuffle -> decode/augment -> batches, the
batch assembly without copies, and the batch-buffer ring the torch workers reuse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "Batch": "assemble",
    "BatchAssembler": "assemble",
    "CorruptImage": "decode",
    "IMAGENET_MEAN": "decode",
    "IMAGENET_STD": "decode",
    "SampleError": "samples",
    "ShmRing": "shmring",
    "augment": "decode",
    "decode_jpeg": "decode",
    "normalize_batch": "decode",
    "process_sample": "samples",
    "raw_samples": "samples",
    "stream": "samples",
}
__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "Batch",
    "BatchAssembler",
    "CorruptImage",
    "SampleError",
    "ShmRing",
    "augment",
    "decode_jpeg",
    "normalize_batch",
    "process_sample",
    "raw_samples",
    "stream",
]

if TYPE_CHECKING:
    from loaders.pipeline.assemble import Batch, BatchAssembler
    from loaders.pipeline.decode import (
        IMAGENET_MEAN,
        IMAGENET_STD,
        CorruptImage,
        augment,
        decode_jpeg,
        normalize_batch,
    )
    from loaders.pipeline.samples import SampleError, process_sample, raw_samples, stream
    from loaders.pipeline.shmring import ShmRing

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
