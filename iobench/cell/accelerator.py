"""The consumer side of the step loop: an emulated accelerator or a real torch training step.

Both expose ``h2d(images, labels)`` and ``step(x, y)``, each returning the seconds it took, so the
step loop and the metrics do not care which one runs.
"""

from __future__ import annotations

import time
from typing import Protocol

import torch

from iobench.cell.demand import Demand, demand_of
from iobench.results.spec import AcceleratorSpec
from loaders import normalize_batch


class Consumer(Protocol):
    device: torch.device
    demand_samples_per_s: float | None

    def h2d(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[object, object, float]: ...

    def step(self, x: object, y: object) -> float: ...

    def describe(self) -> dict: ...


class EmulatedAccelerator:
    """Holds each batch for batch_size / (rate x count) seconds, as DLIO does. With MLPerf Storage's
    figure (a computation_time per step of its batch size) that is DLIO's sleep for a full batch of
    that size, and the same rate per sample for other batch sizes.

    It sleeps rather than spins: a real accelerator leaves the host CPU to the loader workers.
    There is no device, so host-to-device time is reported as zero.
    """

    def __init__(self, demand: Demand, count: int = 1) -> None:
        if count < 1:
            raise ValueError(f"accelerator.count={count}: must be at least 1")
        self.demand, self.count = demand, count
        self.device = torch.device("cpu")
        self.demand_samples_per_s = demand.samples_per_s * count

    def h2d(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[object, object, float]:
        return images, labels, 0.0

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        t0 = time.perf_counter()
        deadline = t0 + len(y) / self.demand_samples_per_s
        while (left := deadline - time.perf_counter()) > 0:
            time.sleep(left)
        return time.perf_counter() - t0

    def describe(self) -> dict:
        return {
            "kind": "emulated",
            "type": self.demand.accelerator,
            "model": self.demand.model,
            "count": self.count,
            "demand": self.demand.kind,
            "samples_per_s_each": self.demand.samples_per_s,
            **(
                {"step_s": self.demand.step_s, "step_batch": self.demand.step_batch}
                if self.demand.step_s
                else {}
            ),
            "source": self.demand.source,
        }


class TorchTrainStep:
    """A real forward/backward/SGD step; on CUDA with AMP (bf16) and channels_last."""

    def __init__(
        self, model: str = "small_cnn", device: str | None = None, threads: int | None = None
    ) -> None:
        from iobench.cell.models import MODELS

        if model not in MODELS:
            raise ValueError(f"accelerator.model={model!r}: allowed values are {', '.join(MODELS)}")
        self.model_name = model
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if threads:
            torch.set_num_threads(threads)
        self.model = MODELS[model]().to(self.device, memory_format=torch.channels_last)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss = torch.nn.CrossEntropyLoss()
        self.amp = self.device.type == "cuda"
        self.demand_samples_per_s = None

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def h2d(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[object, object, float]:
        t0 = time.perf_counter()
        x = images.to(self.device, non_blocking=True)
        y = labels.to(self.device, non_blocking=True)
        x = normalize_batch(x).contiguous(memory_format=torch.channels_last)
        self._sync()
        return x, y, time.perf_counter() - t0

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        t0 = time.perf_counter()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
            loss = self.loss(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self._sync()
        return time.perf_counter() - t0

    def describe(self) -> dict:
        info = {"kind": "torch", "model": self.model_name, "device": str(self.device), "amp": self.amp}
        if self.device.type == "cuda":
            info["gpu"] = torch.cuda.get_device_name(self.device)
        return info


def make_consumer(acc: AcceleratorSpec, device: str | None = None) -> Consumer:
    """The cell's accelerator; ``device`` places a torch model (a rank's own GPU)."""
    demand = demand_of(acc)
    if demand is None:
        return TorchTrainStep(acc.model, device=device)
    return EmulatedAccelerator(demand, acc.count)
