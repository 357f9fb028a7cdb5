"""The NVIDIA DALI backend: decode and augment inside a DALI graph, on the GPU (nvJPEG) when present.

    loader.py  the backend (modes, iteration, resume through the shared epoch cursor, errors)
    graph.py   what runs inside DALI's graph (decode + crop, resize, flip, label parsing)
    feed.py    our fetcher handing DALI encoded JPEGs in the external-source mode

Importing this package imports DALI and torch; ``loaders.registry`` names it without importing it.
"""

from loaders.backends.dali.graph import cuda_devices, dali_available
from loaders.backends.dali.loader import DaliLoader, DaliPipelineError

__all__ = ["DaliLoader", "DaliPipelineError", "cuda_devices", "dali_available"]
