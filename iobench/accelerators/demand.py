"""Per-accelerator input demand (configs/accelerators.yaml), the emulated accelerator's rate: no torch,
so validating a sweep file can read it."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from iobench.results.spec import AcceleratorSpec

DEMANDS = ("training", "mlperf_storage")


class UnknownAccelerator(ValueError):
    """No demand is recorded for that accelerator, model or demand kind; names the allowed values."""


@functools.cache
def _table() -> dict:
    return yaml.safe_load(resources.files("iobench").joinpath("configs/accelerators.yaml").read_text())


def load_accelerator_table() -> dict:
    return _table()["accelerators"]


@dataclass(frozen=True)
class Demand:
    accelerator: str
    model: str
    kind: str
    samples_per_s: float
    source: str
    # DLIO's form, where the table gives it: seconds of compute per step of step_batch samples
    step_s: float | None = None
    step_batch: int | None = None


def lookup_demand(accelerator: str, model: str = "resnet50", kind: str = "training") -> Demand:
    table = load_accelerator_table()
    if accelerator not in table:
        raise UnknownAccelerator(
            f"accelerator.type={accelerator!r}: allowed values are {', '.join(sorted(table))}"
        )
    models = table[accelerator]["models"]
    if model not in models:
        raise UnknownAccelerator(
            f"accelerator.model={model!r} for {accelerator}: allowed values are {', '.join(sorted(models))}"
        )
    if kind not in DEMANDS:
        raise UnknownAccelerator(f"accelerator.demand={kind!r}: allowed values are {', '.join(DEMANDS)}")
    if kind not in models[model]:
        have = ", ".join(k for k in DEMANDS if k in models[model])
        raise UnknownAccelerator(
            f"accelerator.demand={kind!r} for {accelerator}/{model}: configs/accelerators.yaml has no such "
            f"figure (no public source gives one); it has: {have} (demand: {have.split(', ')[0]})"
        )
    entry = models[model][kind]
    source = " ".join(entry["source"].split())
    if "computation_time_s" in entry:  # one figure, as DLIO writes it: the rate follows from it
        step_s, batch = float(entry["computation_time_s"]), int(entry["batch_size"])
        return Demand(accelerator, model, kind, batch / step_s, source, step_s, batch)
    return Demand(accelerator, model, kind, float(entry["samples_per_s"]), source)


def demand_of(acc: AcceleratorSpec) -> Demand | None:
    """What one emulated accelerator of a cell consumes (a rate given in the sweep file, else the
    table's); None for a real torch model, which sets its own pace."""
    if acc.kind != "emulated":
        return None
    if acc.samples_per_s:
        return Demand("custom", acc.model, "custom", float(acc.samples_per_s), "given in the sweep file")
    return lookup_demand(acc.type or "", acc.model, acc.demand)


def load_model_table() -> dict:
    """Each model's parameter count and gradient size (the ``models:`` section of the same file)."""
    return _table()["models"]


def models_with_host_work() -> list[str]:
    """The models whose trainer's host work the table (or a calibration) can give (accelerators/hostcost.py)."""
    return sorted(m for m, entry in load_model_table().items() if "host_work" in entry)


def mlperf_au_threshold(model: str) -> float | None:
    """MLPerf Storage's pass mark for ``model``'s workload, where the table names one."""
    value = (load_model_table().get(model) or {}).get("mlperf_au_threshold")
    return float(value) if value is not None else None
