"""The loader backends, each built from a ``LoaderConfig`` (``loaders.make_loader`` picks one by
name): the torch DataLoader, its readers as threads, torchdata.nodes, and NVIDIA DALI, each a ``BaseLoader`` (skeleton.py:
ranks, plan, len(), resume and stats) that writes its own epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "BaseLoader": "skeleton",
    "DaliLoader": "dali",
    "NodesLoader": "nodes_loader",
    "ShardLoader": "torch_loader",
    "ThreadLoader": "thread_loader",
}
__all__ = [
    "BaseLoader",
    "DaliLoader",
    "NodesLoader",
    "ShardLoader",
    "ThreadLoader",
]

if TYPE_CHECKING:
    from loaders.backends.dali import DaliLoader
    from loaders.backends.nodes_loader import NodesLoader
    from loaders.backends.skeleton import BaseLoader
    from loaders.backends.thread_loader import ThreadLoader
    from loaders.backends.torch_loader import ShardLoader

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
