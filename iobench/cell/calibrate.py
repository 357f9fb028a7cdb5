"""``iobench calibrate``: a real trainer's step alone on this host, kept for the emulated accelerator.

The model steps on one synthetic batch (no loader, nothing else of iobench running): the host's wall
time per step, the trainer process's CPU per step, the torch operators per step and, on CUDA, the
step's span on the device. hostcost.py keeps the result where sweeps read it.
"""

from __future__ import annotations

import datetime as dt

import torch

from iobench.cell.accelerator import TorchTrainStep
from iobench.cell.alone import time_alone
from iobench.cell.hostcost import HostCost, machine

IMAGE_SIZE = 224  # the loaders' default crop (loaders.config.AugmentSpec.size)


def operators_per_step(trainer: TorchTrainStep, x: torch.Tensor, y: torch.Tensor) -> int:
    """Top-level torch operators one step runs (nested ones are part of their caller's region)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(x, y)
    aten = [e for e in prof.events() if e.name.startswith("aten::")]
    return sum(1 for e in aten if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))


def calibrate(model: str, device: str | None, batch_size: int) -> tuple[HostCost, list[str]]:
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
    x, y, _ = trainer.h2d(images, labels)
    alone = time_alone(trainer, x, y, min_steps=10, min_seconds=3.0)
    on = trainer.device.type
    # the fastest step, and the CPU per step in proportion: on a shared host, what an idle one gives
    cost = HostCost(
        model=model,
        device=on,
        batch_size=batch_size,
        step_alone_s=alone.fastest_s,
        cpu_s_per_step=alone.cpu_s * alone.fastest_s / alone.step_s,
        threads=torch.get_num_threads(),
        ops_per_step=operators_per_step(trainer, x, y),
        device_s=alone.device_s,
        source=(
            f"iobench calibrate on {machine()}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC: the fastest of "
            f"{alone.steps} steps alone"
        ),
        kind="calibration",
    )
    return cost, notes
