"""The cores feeding an accelerator takes: the one formula the cell's verdict, ``inspect`` and
``recommend`` use, so for the same inputs they say the same number (docs/method.md, Cores)."""

from __future__ import annotations


def cores_to_feed(samples_per_s: float, cpu_ms_per_sample: float, trainer_cores: float = 0.0) -> float:
    """The cores delivering ``samples_per_s`` keeps busy at ``cpu_ms_per_sample`` of loader CPU each,
    plus the ``trainer_cores`` its trainer process keeps."""
    return samples_per_s * cpu_ms_per_sample / 1000.0 + trainer_cores
