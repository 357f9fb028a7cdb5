"""The trainer's step alone: the consumer stepped on one batch with nothing else of the cell running.

The cell times it after its step loop (the loader's workers are gone by then) on the last batch it
trained on, and ``iobench calibrate`` on a synthetic batch: the step in the cell over this one is
the trainer's slowdown (docs/method.md, *The trainer's host*).
"""

from __future__ import annotations

import statistics
import time

from iobench.results.figures import StepAlone

WARMUP_STEPS = 2  # allocator and kernel warm-up (cuDNN autotuning on a GPU)


def time_alone(consumer, x: object, y: object, *, min_steps: int = 5, min_seconds: float = 1.0) -> StepAlone:
    """Median of at least ``min_steps`` steps and ``min_seconds`` (at most 200 steps) after warm-up."""
    for _ in range(WARMUP_STEPS):
        consumer.step(x, y)
    walls: list[float] = []
    devices: list[float] = []
    t0, c0 = time.perf_counter(), time.process_time()
    while len(walls) < min_steps or (time.perf_counter() - t0 < min_seconds and len(walls) < 200):
        walls.append(consumer.step(x, y))
        devices.append(consumer.last_device_s)
    cpu = time.process_time() - c0
    on_gpu = getattr(consumer, "device", None) is not None and consumer.device.type == "cuda"
    spread = devices if on_gpu else walls
    mean = statistics.fmean(spread)
    return StepAlone(
        step_s=statistics.median(walls),
        fastest_s=min(walls),
        device_s=statistics.median(devices) if on_gpu else None,
        cpu_s=cpu / len(walls),
        steps=len(walls),
        cv=statistics.stdev(spread) / mean if len(spread) > 1 and mean > 0 else None,
    )
