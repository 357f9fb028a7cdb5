"""What the loaders measure and export: per-stage timers and the stall meter, NVML, and a
Prometheus endpoint for a real training job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "GpuCollector": "prometheus",
    "GpuInfo": "nvml",
    "GpuSample": "nvml",
    "LoaderCollector": "prometheus",
    "Loss": "losses",
    "Nvml": "nvml",
    "NvmlUnavailable": "nvml",
    "STAGES": "stages",
    "StageStats": "stages",
    "StallMeter": "stages",
    "Stopwatch": "stages",
    "exported": "prometheus",
    "serve_registry": "prometheus",
}
__all__ = [
    "STAGES",
    "GpuCollector",
    "GpuInfo",
    "GpuSample",
    "LoaderCollector",
    "Loss",
    "Nvml",
    "NvmlUnavailable",
    "StageStats",
    "StallMeter",
    "Stopwatch",
    "exported",
    "serve_registry",
]

if TYPE_CHECKING:
    from loaders.observe.losses import Loss
    from loaders.observe.nvml import GpuInfo, GpuSample, Nvml, NvmlUnavailable
    from loaders.observe.prometheus import GpuCollector, LoaderCollector, exported, serve_registry
    from loaders.observe.stages import STAGES, StageStats, StallMeter, Stopwatch

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
