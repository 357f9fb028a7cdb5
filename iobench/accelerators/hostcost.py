"""What a real trainer's step costs the host, per model: measured here by ``iobench calibrate``, else
the documented default of configs/accelerators.yaml (``models.<model>.host_work``).

An emulated accelerator does this host work every step (hostwork.py) while it sleeps the device
time, so a loader that takes every core slows the emulated step as it slows a real one. No torch
here: validating a sweep file and ``recommend`` read it.

Calibrations are kept in this host's calibration store (iobench/host/calibrations.py), one per
model, device and batch size; the latest measurement of each replaces the one before.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from iobench.accelerators.demand import load_model_table
from iobench.host import calibrations


@dataclass(frozen=True)
class HostCost:
    """One trainer step of ``batch_size`` samples of ``model`` on ``device``, alone on the host."""

    model: str
    device: str  # "cpu" | "cuda": where the model ran when measured
    batch_size: int
    step_alone_s: float  # host wall time of the step (synchronised with the device)
    cpu_s_per_step: float  # the trainer process's CPU time per step, all its threads
    threads: int  # torch intra-op threads the step ran with
    ops_per_step: int  # top-level torch operators per step
    device_s: float | None  # CUDA: the step's span on the device (CUDA events); None on CPU
    source: str
    kind: (
        str  # "calibration" (measured here) | "default" (configs/accelerators.yaml) | "given" (a sweep file)
    )
    # each top-level operator's share of the step's operator time, in the order they ran
    # (torch.profiler): how the emulated host work is cut; None: ``ops_per_step`` equal shares
    op_shares: tuple[float, ...] | None = None
    # the emulated host work's elements per step (hostwork.py), sized right after the step so that
    # both saw the same load; None: sized where the host work runs
    elements_per_step: int | None = None
    # the spread of the step alone (sd / mean of its device spans on CUDA, of its walls on CPU): what
    # an emulated accelerator's ``compute: {cv: calibrated}`` draws with; None: not measured
    step_cv: float | None = None

    @property
    def shares(self) -> tuple[float, ...]:
        """How the host work is cut: the measured shares, else ``ops_per_step`` equal ones."""
        return tuple(self.op_shares) if self.op_shares else (1.0 / self.ops_per_step,) * self.ops_per_step

    @property
    def host_wall_s(self) -> float:
        """The host's wall time per step alone: the whole step on CPU (the host is the device), the
        CPU per step spread over its threads on a GPU (the device runs beside it)."""
        return self.step_alone_s if self.device == "cpu" else self.cpu_s_per_step / max(1, self.threads)

    def at_batch(self, batch_size: int) -> HostCost:
        """The cost at another batch size. On CPU the model's work is per sample, so it scales
        with the batch; on a GPU the host's work per step is launches and Python, the same for
        any batch."""
        if batch_size == self.batch_size or self.device != "cpu":
            return self
        k = batch_size / self.batch_size
        return replace(
            self,
            batch_size=batch_size,
            step_alone_s=self.step_alone_s * k,
            cpu_s_per_step=self.cpu_s_per_step * k,
            # the same operators, each k times the work: the cut is what sets how the step stretches
            elements_per_step=max(1, round(self.elements_per_step * k)) if self.elements_per_step else None,
            source=f"{self.source}; scaled from batch {self.batch_size} to {batch_size} per sample",
        )

    def for_trainers(self, count: int) -> HostCost:
        """The host work of ``count`` trainers stepping together (an emulated ``count`` of
        accelerators in one process): ``count`` times the CPU on ``count`` times the threads, so
        alone it takes the same wall time where the cores suffice, and longer where they do not."""
        if count == 1:
            return self
        return replace(
            self,
            threads=self.threads * count,
            cpu_s_per_step=self.cpu_s_per_step * count,
            elements_per_step=self.elements_per_step * count if self.elements_per_step else None,
            source=f"{self.source}; {count} trainers' host work",
        )

    @property
    def cores(self) -> float:
        """The cores the trainer keeps busy while it steps alone: its CPU per step over the step."""
        return self.cpu_s_per_step / self.step_alone_s if self.step_alone_s > 0 else 0.0

    @property
    def reserved_cores(self) -> int:
        """Whole cores to leave each trainer process: its threads stall on a shared core."""
        return max(1, math.ceil(self.cores - 1e-9))

    def describe(self) -> str:
        return (
            f"{self.model} on {self.device}, batch {self.batch_size}: {1000 * self.cpu_s_per_step:.1f} CPU-ms "
            f"per step on {self.threads} thread(s), step alone {1000 * self.step_alone_s:.1f} ms "
            f"({self.kind}: {self.source})"
        )


def load_calibrations() -> list[HostCost]:
    """This host's calibrations (iobench/host/calibrations.py); none when there are none or they
    cannot be read."""
    # an entry of an older iobench keeps what this one still reads; the host work is then sized
    # where it runs
    known = {f.name for f in fields(HostCost)}
    try:
        return [
            HostCost(**{k: v for k, v in e.items() if k in known})
            for e in calibrations.kept("trainer_host").values()
        ]
    except (AttributeError, TypeError):
        return []


def keep_host_cost(cost: HostCost) -> Path:
    """Keep ``cost`` as this host's calibration of its model, device and batch size."""
    return calibrations.keep(
        "trainer_host", calibrations.trainer_key(cost.model, cost.device, cost.batch_size), asdict(cost)
    )


def default_cost(model: str) -> HostCost:
    """The documented default of configs/accelerators.yaml for ``model``."""
    entry = (load_model_table().get(model) or {}).get("host_work")
    if entry is None:
        raise ValueError(
            f"host_work={model!r}: no default host cost for this model in configs/accelerators.yaml; "
            f"models with one: {', '.join(m for m, e in load_model_table().items() if 'host_work' in e)}"
        )
    return HostCost(
        model=model,
        device=entry["device"],
        batch_size=int(entry["batch_size"]),
        step_alone_s=float(entry["step_alone_ms"]) / 1000.0,
        cpu_s_per_step=float(entry["cpu_ms_per_step"]) / 1000.0,
        threads=int(entry["threads"]),
        ops_per_step=int(entry["ops_per_step"]),
        op_shares=tuple(float(x) for x in entry["op_shares"]) if entry.get("op_shares") else None,
        device_s=float(entry["device_ms"]) / 1000.0 if entry.get("device_ms") else None,
        source=" ".join(entry["source"].split()),
        kind="default",
    )


# an emulated trainer's host work given as its CPU per step ("35ms", or "35ms x2" on two threads):
# what `iobench probe` measured of a job's trainer, carried into its sweep file
GIVEN_WORK = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*ms(?:\s*x\s*(\d+))?\s*$")


def given_cost(text: str, batch_size: int) -> HostCost | None:
    """The host work ``text`` gives as CPU-ms per step (``"35ms x2"``), or None when it names none
    that way (a model's name, ``none``)."""
    found = GIVEN_WORK.match(text)
    if found is None:
        return None
    cpu_s, threads = float(found.group(1)) / 1000.0, int(found.group(2) or 1)
    if cpu_s <= 0 or threads < 1:
        raise ValueError(f"host_work={text!r}: give a positive CPU time per step on one or more threads")
    return HostCost(
        model=text.strip(),
        device="cuda",  # the work runs beside the device's time, as a GPU trainer's host does
        batch_size=batch_size,
        step_alone_s=cpu_s / threads,
        cpu_s_per_step=cpu_s,
        threads=threads,
        ops_per_step=max(1, round(cpu_s / 40e-6)),  # PyTorch eager: some 40 µs of host CPU an operator
        device_s=None,
        source=f"given in the sweep file: {cpu_s * 1000:g} CPU-ms per step on {threads} thread(s) (a probed job's trainer)",
        kind="given",
    )


def host_cost(model: str, batch_size: int, device: str | None = None) -> HostCost:
    """The host cost of ``model``'s step at ``batch_size``: this host's calibration (on ``device``,
    else CUDA's before the CPU's, the batch size measured nearest) or the documented default."""
    found = [c for c in load_calibrations() if c.model == model and device in (None, c.device)]
    if found:
        best = min(found, key=lambda c: (c.device != "cuda", abs(c.batch_size - batch_size)))
        return best.at_batch(batch_size)
    return default_cost(model).at_batch(batch_size)
