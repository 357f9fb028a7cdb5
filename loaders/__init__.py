"""Drop-in data loaders for training code, instrumented the way iobench measures them.

This package never imports iobench: training code can use it alone.
"""

from .decode import AugmentSpec, normalize_batch
from .instrument import StageStats, StallMeter
from .pipeline import Batch, PipelineSpec, SampleError
from .shards import expand_urls
from .tario import ShardFormatError
from .torch_loader import ShardLoader

__all__ = [
    "AugmentSpec",
    "Batch",
    "PipelineSpec",
    "SampleError",
    "ShardFormatError",
    "ShardLoader",
    "StageStats",
    "StallMeter",
    "expand_urls",
    "normalize_batch",
]
