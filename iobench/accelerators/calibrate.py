"""``iobench calibrate``: a real trainer's step alone on this host, kept for the emulated accelerator.

The model steps on one synthetic batch (no loader, nothing else of iobench running), each step with
its batch's copy to the device and normalisation, as a cell's step loop does them (an emulated
accelerator has no copy of its own, so its host work carries it): the host's wall time per step,
the trainer process's CPU per step, the torch operators per step with each one's share of the
step's operator time (how the emulated host work is cut) and, on CUDA, the step's span on the
device. hostcost.py keeps the result where sweeps read it.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import replace

import torch

from iobench.accelerators.alone import time_alone
from iobench.accelerators.consumers import TorchTrainStep
from iobench.accelerators.hostcost import HostCost
from iobench.accelerators.hostwork import elements_for
from iobench.host.machine import this_host

IMAGE_SIZE = 224  # the loaders' default crop (loaders.config.AugmentSpec.size)


class CopyAndStep:
    """The trainer's host share of one step: the batch's copy and normalisation, then the step."""

    def __init__(self, trainer: TorchTrainStep) -> None:
        self.trainer = trainer
        self.device = trainer.device
        self.last_device_s = 0.0
        self.last_work_s: float | None = None  # a real model: no fixed work sized to a time
        self.work_sized_s: float | None = None

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> float:
        t0 = time.perf_counter()
        self.trainer.step(*self.trainer.h2d(images, labels)[:2])
        self.last_device_s = self.trainer.last_device_s
        return time.perf_counter() - t0


def operator_shares(
    consumer: CopyAndStep, images: torch.Tensor, labels: torch.Tensor, steps: int = 3
) -> tuple[float, ...]:
    """Each top-level torch operator's share of a step's operator time, in the order they ran
    (nested operators are part of their caller's region), summed over ``steps`` profiled steps."""
    from torch.profiler import ProfilerActivity, profile

    totals: list[float] = []
    for _ in range(steps):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            consumer.step(images, labels)
        aten = [e for e in prof.events() if e.name.startswith("aten::")]
        times = [
            e.cpu_time_total
            for e in aten
            if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")
        ]
        # a step whose operators differ from the first's (it should not) replaces the sum
        totals = [a + b for a, b in zip(totals, times, strict=True)] if len(totals) == len(times) else times
    whole = sum(totals) or 1.0
    return tuple(t / whole for t in totals)


def measure_host_cost(model: str, device: str | None, batch_size: int) -> tuple[HostCost, list[str]]:
    """Measure ``model``'s step alone on ``device`` ("cpu" | "cuda"; None: CUDA where present).
    Asked for CUDA on a host without it, it measures on the CPU and says so in the notes."""
    notes = []
    if device == "cuda" and not torch.cuda.is_available():
        notes.append(
            f"no CUDA device here: measured {model} on the CPU instead; this host cost is the whole "
            "step's (the host is the device), not a GPU trainer's host share"
        )
        device = "cpu"
    trainer = TorchTrainStep(model, device=device)
    images = torch.randint(0, 256, (batch_size, 3, IMAGE_SIZE, IMAGE_SIZE), dtype=torch.uint8)
    labels = torch.randint(0, 1000, (batch_size,))
    consumer = CopyAndStep(trainer)
    alone = time_alone(consumer, images, labels, min_steps=10, min_seconds=3.0)
    on = trainer.device.type
    shares = operator_shares(consumer, images, labels)
    # the fastest step, and the CPU per step in proportion: on a shared host, what an idle one gives
    cost = HostCost(
        model=model,
        device=on,
        batch_size=batch_size,
        step_alone_s=alone.fastest_s,
        cpu_s_per_step=alone.cpu_s * alone.fastest_s / alone.step_s,
        threads=torch.get_num_threads(),
        ops_per_step=len(shares),
        op_shares=shares,
        device_s=alone.device_s,
        source=(
            f"iobench calibrate on {this_host()}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: the fastest of "
            f"{alone.steps} steps alone"
        ),
        kind="calibration",
        step_cv=alone.cv,
    )
    # the host work sized on as many steps of it as the real step ran, the fastest kept: the same
    # statistic over the same spell of load
    return replace(cost, elements_per_step=elements_for(cost.host_wall_s, cost.shares, alone.steps)), notes
