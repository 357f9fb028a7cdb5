"""What the loaders measure and export: per-stage timers and the stall meter, NVML, and a
Prometheus endpoint for a real training job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loaders._faces import lazy_face

_EXPORTS = {
    "FAULT_KINDS": "counters",
    "CacheHealthCounts": "counters",
    "CacheStats": "counters",
    "FaultKind": "counters",
    "LoaderCounters": "counters",
    "LossCounts": "counters",
    "RequestCounts": "counters",
    "ThrottleCounts": "counters",
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
    "FAULT_KINDS",
    "STAGES",
    "CacheHealthCounts",
    "CacheStats",
    "FaultKind",
    "GpuCollector",
    "GpuInfo",
    "GpuSample",
    "LoaderCollector",
    "LoaderCounters",
    "Loss",
    "LossCounts",
    "Nvml",
    "NvmlUnavailable",
    "RequestCounts",
    "StageStats",
    "StallMeter",
    "Stopwatch",
    "ThrottleCounts",
    "exported",
    "serve_registry",
]

if TYPE_CHECKING:
    from loaders.observe.counters import (
        FAULT_KINDS,
        CacheHealthCounts,
        CacheStats,
        FaultKind,
        LoaderCounters,
        LossCounts,
        RequestCounts,
        ThrottleCounts,
    )
    from loaders.observe.losses import Loss
    from loaders.observe.nvml import GpuInfo, GpuSample, Nvml, NvmlUnavailable
    from loaders.observe.prometheus import GpuCollector, LoaderCollector, exported, serve_registry
    from loaders.observe.stages import STAGES, StageStats, StallMeter, Stopwatch

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
