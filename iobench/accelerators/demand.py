"""Per-accelerator input demand (configs/accelerators.yaml), the emulated accelerator's rate: no torch,
so validating a sweep file can read it."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Literal, TypeGuard, get_args

import yaml

from iobench.results.choices import DemandKind

if TYPE_CHECKING:
    from iobench.results.spec import AcceleratorSpec

DEMANDS: tuple[DemandKind, ...] = get_args(DemandKind)
# what a figure of configs/accelerators.yaml is (its header says): read at its source, computed
# from published figures, or an estimate no public source gives
TableOrigin = Literal["published", "derived", "assumed"]


class UnknownAccelerator(ValueError):
    """No demand is recorded for that accelerator, model or demand kind; names the allowed values."""


@functools.cache
def _table() -> dict:
    return yaml.safe_load(resources.files("iobench").joinpath("configs/accelerators.yaml").read_text())


def _is_origin(value: object) -> TypeGuard[TableOrigin]:
    return value in get_args(TableOrigin)


def _origin(entry: dict, default: TableOrigin, where: str) -> TableOrigin:
    """The entry's origin; a value the table's header does not define is an error in the table."""
    origin = entry.get("origin", default)
    if not _is_origin(origin):
        raise ValueError(
            f"configs/accelerators.yaml {where}: origin={origin!r}: allowed values are "
            f"{', '.join(get_args(TableOrigin))}"
        )
    return origin


def load_accelerator_table() -> dict:
    return _table()["accelerators"]


@dataclass(frozen=True)
class Demand:
    accelerator: str
    model: str
    kind: DemandKind | Literal["custom"]  # custom: a rate given in the sweep file
    samples_per_s: float
    source: str
    # DLIO's form, where the table gives it: seconds of compute per step of step_batch samples
    step_s: float | None = None
    step_batch: int | None = None
    origin: TableOrigin = "published"


def lookup_demand(accelerator: str, model: str = "resnet50", kind: DemandKind = "training") -> Demand:
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
    origin = _origin(entry, "published", f"{accelerator}/{model}/{kind}")
    if "computation_time_s" in entry:  # one figure, as DLIO writes it: the rate follows from it
        step_s, batch = float(entry["computation_time_s"]), int(entry["batch_size"])
        return Demand(accelerator, model, kind, batch / step_s, source, step_s, batch, origin)
    return Demand(accelerator, model, kind, float(entry["samples_per_s"]), source, origin=origin)


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


@dataclass(frozen=True)
class AcceleratorFacts:
    """What the table says of an accelerator type beside its demand: its vendor and its memory as
    the vendor's specification states it (GB: decimal bytes)."""

    name: str
    vendor: str  # nvidia | amd
    memory_bytes: float | None
    memory_said: str


def accelerator_facts(accelerator: str) -> AcceleratorFacts | None:
    """The vendor and memory of ``accelerator`` (configs/accelerators.yaml), None when unknown."""
    from iobench.host.units import parse_size

    entry = load_accelerator_table().get(accelerator)
    if entry is None:
        return None
    memory = entry.get("memory")
    source = " ".join((entry.get("memory_source") or "").split())
    return AcceleratorFacts(
        accelerator,
        entry.get("vendor", "nvidia"),
        float(parse_size(memory)) if memory else None,
        f"{memory}: {source}" if memory else "not known",
    )


@dataclass(frozen=True)
class ReadCpu:
    """The host CPU reading one sample costs in MLPerf Storage's emulation of a model, where its
    submitters measured it: cores per accelerator at one accelerator type's demand."""

    cores_per_accelerator: float
    accelerator: str
    ms_per_sample: float
    origin: TableOrigin
    source: str


def read_cpu(model: str) -> ReadCpu | None:
    """The measured CPU per sample of reading ``model``'s samples without decoding, if known."""
    entry = (load_model_table().get(model) or {}).get("read_cpu")
    if not entry:
        return None
    at = lookup_demand(entry["accelerator"], model, "mlperf_storage")
    cores = float(entry["cores_per_accelerator"])
    return ReadCpu(
        cores,
        entry["accelerator"],
        1000.0 * cores / at.samples_per_s,
        _origin(entry, "derived", f"models/{model}/read_cpu"),
        " ".join(entry["source"].split()),
    )
