"""The consumer side of the step loop: an emulated accelerator or a real torch training step.

Both expose ``h2d(images, labels)`` and ``step(x, y)``, each returning the host seconds it took, and
``last_device_s``, the device's time for the last step (docs/method.md, *The trainer's host*), and
``last_draw_s``, the device time an emulated accelerator drew for it (None for a real model), so
the step loop and the metrics do not care which one runs.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol

import torch

from iobench.accelerators.demand import Demand, demand_of
from iobench.accelerators.hostcost import HostCost, given_cost, host_cost
from iobench.accelerators.hostwork import HostWork
from iobench.accelerators.jitter import factors
from iobench.results.spec import AcceleratorSpec, ComputeSpec
from loaders import normalize_batch


class Consumer(Protocol):
    """A trainer the cell feeds: what it reads of one is read-only here (each kind narrows it: a real
    model has no demand of its own and no drawn or sized time)."""

    @property
    def device(self) -> torch.device: ...

    @property
    def demand_samples_per_s(self) -> float | None: ...

    @property
    def last_device_s(self) -> float:
        """The device's time for the last step (CUDA events; the step on CPU)."""
        ...

    @property
    def last_draw_s(self) -> float | None:
        """Emulated: the device time drawn for the last step; None: a real model."""
        ...

    @property
    def au_basis(self) -> str:
        """What AU divides by the wall (docs/method.md, The trainer's host)."""
        ...

    @property
    def last_work_s(self) -> float | None:
        """An emulated trainer's fixed host work: its seconds in the last step (accelerators/alone.py);
        None for a real model."""
        ...

    @property
    def work_sized_s(self) -> float | None:
        """What that work was sized to take, where it was sized in this process; None otherwise."""
        ...

    def h2d(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[object, object, float]: ...

    def step(self, x: Any, y: Any) -> float: ...  # what h2d gave: each consumer takes its own kind

    def describe(self) -> dict: ...


class EmulatedAccelerator:
    """Holds each batch for batch_size / (rate x count) seconds of device time, as DLIO does. With
    MLPerf Storage's figure (a computation_time per step of its batch size) that is DLIO's sleep for
    a full batch of that size, and the same rate per sample for other batch sizes.

    Unlike DLIO it also does a real trainer's host work per step (``host``: hostwork.py), on this
    thread while the device time runs, then sleeps what is left of the device time: alone the step
    lasts the device time, and on a host whose cores the loader takes the host work stretches it
    as it stretches a real trainer's step. ``host=None`` sleeps only (DLIO's emulation).
    There is no device, so host-to-device time is reported as zero.

    ``compute`` draws each step's device time around that mean (accelerators/jitter.py), from rank
    ``rank``'s stream of its seed; None holds it constant.
    """

    def __init__(
        self,
        demand: Demand,
        count: int = 1,
        host: HostCost | None = None,
        compute: ComputeSpec | None = None,
        rank: int = 0,
    ) -> None:
        if count < 1:
            raise ValueError(f"accelerator.count={count}: must be at least 1")
        self.demand, self.count = demand, count
        self.compute, self.rank = compute, rank
        self._factor = factors(compute, rank) if compute is not None else (lambda: 1.0)
        self.last_draw_s: float | None = None
        self.device = torch.device("cpu")
        self.demand_samples_per_s = demand.samples_per_s * count
        self.host = host
        self.host_work = HostWork(host) if host is not None else None
        self.last_device_s = 0.0
        self.last_work_s: float | None = None
        self.work_sized_s = self.host_work.sized_s if self.host_work is not None else None
        self.au_basis = "emulated device time"

    def for_count(self, count: int, host: HostCost | None) -> EmulatedAccelerator:
        """The same trainer for ``count`` accelerators: ``host`` (their host work, or None) carries
        the work this one sized on this host, per trainer, so both step alike under the same load."""
        if host is not None and self.host_work is not None:
            per_trainer = sum(self.host_work.sizes) / self.count
            host = replace(host, elements_per_step=max(1, round(per_trainer * count)))
        return EmulatedAccelerator(self.demand, count, host, self.compute, self.rank)

    def h2d(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[object, object, float]:
        return images, labels, 0.0

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        t0 = time.perf_counter()
        device_s = len(y) / self.demand_samples_per_s * self._factor()
        self.last_draw_s = device_s
        host_s = self.host_work.run() if self.host_work is not None else 0.0
        self.last_work_s = host_s if self.host_work is not None else None
        deadline = t0 + device_s
        while (left := deadline - time.perf_counter()) > 0:
            time.sleep(left)
        took = time.perf_counter() - t0
        # a step whose host work outlasted the device time kept the device idle while it ran
        self.last_device_s = device_s if host_s > device_s else took
        return took

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
            "host_work": self.host.describe() if self.host else "none (sleeps only, as DLIO)",
            # the device time's distribution per step: steps.parquet's compute_draw_s holds each draw
            "compute": (
                {
                    "dist": c.dist,
                    "cv": c.cv,
                    "seed": c.seed,
                    "rank_streams": "SeedSequence([seed, rank])",
                    "source": c.source,
                }
                if (c := self.compute)
                else {"dist": "constant", "cv": 0.0}
            ),
        }


class TorchTrainStep:
    """A real forward/backward/SGD step; on CUDA with AMP (bf16) and channels_last."""

    def __init__(
        self, model: str = "small_cnn", device: str | None = None, threads: int | None = None
    ) -> None:
        from iobench.accelerators.models import MODELS

        if model not in MODELS:
            raise ValueError(f"accelerator.model={model!r}: allowed values are {', '.join(MODELS)}")
        self.model_name = model
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if threads:
            torch.set_num_threads(threads)
        self.model = MODELS[model]().to(self.device, memory_format=torch.channels_last)  # type: ignore[call-overload]  # Module.to takes memory_format (torch documents it); its typed overloads leave it out
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss = torch.nn.CrossEntropyLoss()
        self.amp = self.device.type == "cuda"
        self.demand_samples_per_s = None
        self.last_device_s = 0.0
        self.last_draw_s = None
        self.last_work_s = None
        self.work_sized_s = None
        self.au_basis = "GPU busy (CUDA events)" if self.amp else "CPU step (the host is the device)"
        if self.amp:  # the step's span on the device, beside the host's wall time
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def h2d(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        t0 = time.perf_counter()
        x = images.to(self.device, non_blocking=True)
        y = labels.to(self.device, non_blocking=True)
        x = normalize_batch(x).contiguous(memory_format=torch.channels_last)
        self._sync()
        return x, y, time.perf_counter() - t0

    def step(self, x: torch.Tensor, y: torch.Tensor) -> float:
        t0 = time.perf_counter()
        if self.amp:
            self._events[0].record()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.amp):
            loss = self.loss(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        if self.amp:
            self._events[1].record()
        self._sync()
        took = time.perf_counter() - t0
        # on CPU the host is the device: the synchronous step's own time
        self.last_device_s = self._events[0].elapsed_time(self._events[1]) / 1000.0 if self.amp else took
        return took

    def describe(self) -> dict:
        info = {"kind": "torch", "model": self.model_name, "device": str(self.device), "amp": self.amp}
        if self.device.type == "cuda":
            info["gpu"] = torch.cuda.get_device_name(self.device)
        return info


def emulated_host_cost(acc: AcceleratorSpec, batch_size: int) -> HostCost | None:
    """The host work an emulated accelerator does per step: ``acc.host_work`` ("none", or a model
    whose calibration, else documented default, hostcost.py gives), by default its own model's,
    and none in MLPerf Storage's emulation, which sleeps only; ``acc.count`` trainers' of it."""
    name = acc.host_work or ("none" if acc.demand == "mlperf_storage" else acc.model)
    if name == "none":
        return None
    # ``count`` accelerators share each batch: as many trainers, each stepping on its share
    share = max(1, batch_size // acc.count)
    return (given_cost(name, share) or host_cost(name, share)).for_trainers(acc.count)


def make_consumer(
    acc: AcceleratorSpec, batch_size: int, device: str | None = None, rank: int = 0
) -> Consumer:
    """The cell's accelerator; ``device`` places a torch model (a rank's own GPU); ``rank`` picks an
    emulated accelerator's stream of compute draws."""
    demand = demand_of(acc)
    if demand is None:
        return TorchTrainStep(acc.model, device=device)
    return EmulatedAccelerator(demand, acc.count, emulated_host_cost(acc, batch_size), acc.compute, rank)
