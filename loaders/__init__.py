"""Drop-in data loaders for training code, instrumented the way iobench measures them.

This package never imports iobench: training code can use it alone. Pick a backend by name::

    loader = make_loader("torch" | "threads" | "nodes" | "dali", LoaderConfig(urls=..., batch_size=256))

Names load on first use (PEP 562), so ``import loaders.registry`` or ``loaders.config`` costs no
torch: a sweep file is checked against the backends' declared options before torch is imported.

By concern, each subpackage a face of its own (``__all__``; import from the face, not its modules):

    storage/    local files, object stores, the shard cache, a throttled link
    formats/    tar, Parquet (readers and writers, one table by suffix), one object per sample
    pipeline/   stages as nodes (shard cursor, shuffle, batch fill), decode, augment, the batch-buffer ring
    backends/   torch DataLoader (processes or threads), torchdata.nodes, DALI, on one skeleton (ranks, plan, len, resume, stats)
    observe/    stage timers, the stall meter, NVML, Prometheus

and at the top: ``config`` (every setting), ``options`` (declared plugin options), ``registry``
(backends by name), ``contract`` (the protocol and the epoch cursor), ``plan`` (the epoch's split).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "AugmentSpec": "config",
    "Batch": "pipeline.batch",
    "Loader": "contract",
    "LoaderConfig": "config",
    "Option": "options",
    "PipelineSpec": "config",
    "SampleError": "pipeline.samples",
    "SamplesLostError": "epochtally",
    "ShardFormatError": "formats.base",
    "ShardLoader": "backends.torch_loader",
    "StageStats": "observe.stages",
    "StallMeter": "observe.stages",
    "available_loaders": "registry",
    "expand_urls": "plan",
    "make_loader": "registry",
    "normalize_batch": "pipeline.decode",
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
    "SamplesLostError",
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
    from loaders.backends.torch_loader import ShardLoader
    from loaders.config import AugmentSpec, LoaderConfig, PipelineSpec
    from loaders.contract import Loader
    from loaders.epochtally import SamplesLostError
    from loaders.formats.base import ShardFormatError
    from loaders.observe.stages import StageStats, StallMeter
    from loaders.options import Option
    from loaders.pipeline.batch import Batch
    from loaders.pipeline.decode import normalize_batch
    from loaders.pipeline.samples import SampleError
    from loaders.plan import expand_urls
    from loaders.registry import available_loaders, make_loader, register_loader

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
