"""Drop-in data loaders for training code, instrumented the way iobench measures them.

This package never imports iobench: training code can use it alone. Pick a backend by name::

    loader = make_loader("torch" | "nodes" | "dali", LoaderConfig(urls=..., batch_size=256))
"""

from .assemble import Batch
from .contract import Loader, LoaderConfig, available_loaders, make_loader, register_loader
from .decode import AugmentSpec, normalize_batch
from .instrument import StageStats, StallMeter
from .pipeline import PipelineSpec, SampleError
from .shards import expand_urls
from .tario import ShardFormatError
from .torch_loader import ShardLoader

__all__ = [
    "AugmentSpec",
    "Batch",
    "Loader",
    "LoaderConfig",
    "PipelineSpec",
    "SampleError",
    "ShardFormatError",
    "ShardLoader",
    "StageStats",
    "StallMeter",
    "available_loaders",
    "expand_urls",
    "make_loader",
    "normalize_batch",
    "register_loader",
]
