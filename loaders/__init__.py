"""Drop-in data loaders for training code, instrumented the way iobench measures them.

This package never imports iobench: training code can use it alone. Pick a backend by name::

    loader = make_loader("torch" | "nodes" | "dali", LoaderConfig(urls=..., batch_size=256))

Names load on first use (PEP 562), so ``import loaders.registry`` or ``loaders.config`` costs no
torch: a sweep file is checked against the backends' declared options before torch is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AugmentSpec": "config",
    "Batch": "assemble",
    "Loader": "contract",
    "LoaderConfig": "config",
    "Option": "options",
    "PipelineSpec": "config",
    "SampleError": "pipeline",
    "ShardFormatError": "tario",
    "ShardLoader": "torch_loader",
    "StageStats": "instrument",
    "StallMeter": "instrument",
    "available_loaders": "registry",
    "expand_urls": "shards",
    "make_loader": "registry",
    "normalize_batch": "decode",
    "register_loader": "registry",
}
__all__ = [
    "AugmentSpec",
    "Batch",
    "Loader",
    "LoaderConfig",
    "Option",
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

if TYPE_CHECKING:
    from .assemble import Batch
    from .config import AugmentSpec, LoaderConfig, PipelineSpec
    from .contract import Loader
    from .decode import normalize_batch
    from .instrument import StageStats, StallMeter
    from .options import Option
    from .pipeline import SampleError
    from .registry import available_loaders, make_loader, register_loader
    from .shards import expand_urls
    from .tario import ShardFormatError
    from .torch_loader import ShardLoader


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loaders' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
