"""The gradient all-reduce that ends every step of synchronous data-parallel training, modelled on
the target fabric (configs/interconnects.yaml), because this host's loopback is not one.

A ring all-reduce of G bytes over W ranks, each with a link of bandwidth B and a per-step latency
a, takes ``t(W) = 2 (W - 1) / W x G / B + 2 (W - 1) x a`` (the alpha-beta model; sources in the
table). DDP launches the all-reduce of gradient buckets while the backward pass still runs, so a
share ``overlap`` of the step's compute hides it; the step waits for ``max(0, t(W) - overlap x
compute)``: the *exposed* all-reduce. Definitions in docs/method.md (Synchronous training).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from iobench.accelerators.demand import load_model_table
from iobench.host.units import parse_bandwidth
from iobench.results.spec import AcceleratorSpec, InterconnectSpec, RunSettings

DEFAULT_INTERCONNECT = "ib-ndr-400"


class UnknownInterconnect(ValueError):
    """An interconnect name the table does not hold, or a mapping that does not describe one."""


def load_interconnect_table() -> dict[str, Any]:
    text = resources.files("iobench").joinpath("configs/interconnects.yaml").read_text()
    return yaml.safe_load(text)["interconnects"]


def interconnect(value: str | dict) -> InterconnectSpec:
    """An interconnect by name from the table, or one described in the sweep file as
    ``{name, bandwidth: 10GB/s, latency_us: 5}``."""

    if isinstance(value, str):
        table = load_interconnect_table()
        if value not in table:
            raise UnknownInterconnect(
                f"interconnect {value!r}: known ones are {', '.join(sorted(table))} (configs/interconnects.yaml), "
                "or describe yours as {name: ..., bandwidth: 25GB/s, latency_us: 5}"
            )
        entry, name = table[value], value
    elif isinstance(value, dict) and set(value) <= {"name", "bandwidth", "latency_us", "source"}:
        entry, name = value, str(value.get("name", "custom"))
    else:
        raise UnknownInterconnect(
            f"interconnect {value!r}: give a name from configs/interconnects.yaml or a mapping with "
            "bandwidth (e.g. 25GB/s) and latency_us"
        )
    try:
        bandwidth = parse_bandwidth(entry["bandwidth"])
        latency_us = float(entry.get("latency_us", 0.0))
    except (KeyError, TypeError, ValueError) as exc:
        raise UnknownInterconnect(f"interconnect {name!r}: {exc}") from None
    if latency_us < 0:
        raise UnknownInterconnect(f"interconnect {name!r}: latency_us={latency_us} must be >= 0")
    source = " ".join(str(entry.get("source", "given in the sweep file")).split())
    return InterconnectSpec(name, bandwidth, latency_us * 1e-6, source)


def gradient_bytes(model: str) -> int:
    """Bytes one rank's gradient all-reduce moves per step for ``model`` (configs/accelerators.yaml)."""
    entry = load_model_table().get(model)
    if entry is None or "parameters" not in entry:
        raise UnknownInterconnect(f"model {model!r} has no parameter count in configs/accelerators.yaml")
    return int(entry["parameters"]) * int(entry["gradient_bytes_per_parameter"])


def gradient_size_known(accelerator: AcceleratorSpec, consumer: object) -> bool:
    """A real model's parameters are counted; the table has counts for some models only (MLPerf
    Storage's workloads beyond ResNet-50 give their whole step's compute, no parameter count)."""
    entry = load_model_table().get(accelerator.model) or {}
    return getattr(consumer, "model", None) is not None or "parameters" in entry


def gradient_bytes_of(accelerator: AcceleratorSpec, consumer: object) -> int:
    """A real model's own parameters (fp32 gradients), else the table's figure for the model."""
    model = getattr(consumer, "model", None)
    if model is not None:
        return 4 * sum(p.numel() for p in model.parameters() if p.requires_grad)
    return gradient_bytes(accelerator.model)


@dataclass(frozen=True)
class AllReduceModel:
    gradient_bytes: int
    fabric: InterconnectSpec
    overlap: float  # share of a step's compute the all-reduce hides behind

    def seconds(self, world_size: int) -> float:
        """The whole ring all-reduce for ``world_size`` ranks (0 for one rank)."""
        w = world_size
        if w <= 1:
            return 0.0
        bandwidth_term = 2 * (w - 1) / w * self.gradient_bytes / self.fabric.bandwidth_bytes_per_s
        return bandwidth_term + 2 * (w - 1) * self.fabric.latency_s

    def exposed(self, world_size: int, compute_s: float) -> float:
        """What a step waits for after its compute: the all-reduce less what the backward pass hid."""
        return max(0.0, self.seconds(world_size) - self.overlap * compute_s)


def allreduce_model(
    run: RunSettings, accelerator: AcceleratorSpec, consumer: object
) -> AllReduceModel | None:
    """The cell's modelled all-reduce (None when its run settings name no fabric, or the model's
    gradient size is unknown: the files' notes then say the all-reduce is not modelled)."""
    if run.interconnect is None or not gradient_size_known(accelerator, consumer):
        return None
    return AllReduceModel(gradient_bytes_of(accelerator, consumer), run.interconnect, run.allreduce_overlap)
