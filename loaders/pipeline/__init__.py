"""The backend-neutral sample pipeline, its stages as nodes (``next``, ``reset(state)``,
``get_state``; node.py): shards -> samples (the shard cursor) -> shuffle -> decode/augment ->
batches (the batch fill), composed per reader (reader.py); the batch and its bookkeeping, the batch
assembly without copies, and the batch-buffer ring the torch workers reuse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "Batch": "batch",
    "BatchAssembler": "assemble",
    "Batcher": "batcher",
    "CorruptImage": "decode",
    "IMAGENET_MEAN": "decode",
    "IMAGENET_STD": "decode",
    "REGION_DECODER_MISSING": "decoders",
    "InTurn": "in_turn",
    "Items": "items",
    "Bookkeeping": "batch",
    "Node": "node",
    "ObjectReads": "object_reads",
    "SampleError": "samples",
    "ShardSamples": "shard_samples",
    "ShmRing": "shmring",
    "Shuffle": "shuffle",
    "augment": "decode",
    "decode_crop": "cropdecode",
    "decode_jpeg": "decode",
    "decoder_name": "decoders",
    "normalize_batch": "decode",
    "process_sample": "samples",
    "raw_samples": "reader",
    "reader_batches": "reader",
    "reader_rng": "reader",
    "region_decode_available": "decoders",
    "resize_flip": "decode",
}
__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "REGION_DECODER_MISSING",
    "Batch",
    "BatchAssembler",
    "Batcher",
    "Bookkeeping",
    "CorruptImage",
    "InTurn",
    "Items",
    "Node",
    "ObjectReads",
    "SampleError",
    "ShardSamples",
    "ShmRing",
    "Shuffle",
    "augment",
    "decode_crop",
    "decode_jpeg",
    "decoder_name",
    "normalize_batch",
    "process_sample",
    "raw_samples",
    "reader_batches",
    "reader_rng",
    "region_decode_available",
    "resize_flip",
]

if TYPE_CHECKING:
    from loaders.pipeline.assemble import BatchAssembler
    from loaders.pipeline.batch import Batch, Bookkeeping
    from loaders.pipeline.batcher import Batcher
    from loaders.pipeline.cropdecode import decode_crop
    from loaders.pipeline.decode import (
        IMAGENET_MEAN,
        IMAGENET_STD,
        CorruptImage,
        augment,
        decode_jpeg,
        normalize_batch,
        resize_flip,
    )
    from loaders.pipeline.decoders import REGION_DECODER_MISSING, decoder_name, region_decode_available
    from loaders.pipeline.in_turn import InTurn
    from loaders.pipeline.items import Items
    from loaders.pipeline.node import Node
    from loaders.pipeline.object_reads import ObjectReads
    from loaders.pipeline.reader import raw_samples, reader_batches, reader_rng
    from loaders.pipeline.samples import SampleError, process_sample
    from loaders.pipeline.shard_samples import ShardSamples
    from loaders.pipeline.shmring import ShmRing
    from loaders.pipeline.shuffle import Shuffle

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
