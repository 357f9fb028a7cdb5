"""The cores the accelerators need from this host: per accelerator, its share of decode + augment
at the demand (the host's per-core rate, at the mean sample of the dataset the model trains on) and
the whole cores its trainer process keeps. ``iobench recommend`` prices a sample the same way at the
same size, so both say the same number for the same inputs; recommend with ``--results`` adds the
CPU a sweep measured beyond decode + augment (collate, fetch, the loader's overhead, the training
process), and says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from iobench.accelerators.hostcost import HostCost, host_cost
from iobench.analysis.cores import cores_to_feed
from iobench.analysis.decoderate import DecodeRate

from .accelerators import AcceleratorDemand

TRAINER_BATCH = 256  # the batch a trainer's host cost is quoted at, as recommend's default


@dataclass(frozen=True)
class CoresEstimate:
    count: int  # accelerators
    decode_per_accelerator: float  # cores of decode + augment one accelerator's demand keeps busy
    trainer_per_accelerator: int  # whole cores its trainer keeps
    sample_bytes: float
    counted: str  # which CPU costs are in, in words

    JSON_DERIVED: ClassVar[tuple[str, ...]] = ("per_accelerator", "total")

    @property
    def per_accelerator(self) -> float:
        return self.decode_per_accelerator + self.trainer_per_accelerator

    @property
    def total(self) -> float:
        return self.count * self.per_accelerator


def trainer_cost(demand: AcceleratorDemand) -> HostCost | None:
    """The host cost behind a trainer's cores (accelerators/hostcost.py); none for MLPerf Storage's
    emulation, which sleeps (as iobench's emulation of it does)."""
    return None if demand.kind == "mlperf_storage" else host_cost(demand.model, TRAINER_BATCH)


def estimate_cores(demand: AcceleratorDemand, rate: DecodeRate) -> CoresEstimate:
    cost = trainer_cost(demand)
    return CoresEstimate(
        count=demand.count,
        decode_per_accelerator=cores_to_feed(
            demand.samples_per_s_each, rate.ms_per_sample(demand.sample_bytes)
        ),
        trainer_per_accelerator=cost.reserved_cores if cost else 0,
        sample_bytes=demand.sample_bytes,
        counted="decode + augment at the demand, and the trainers' cores: a lower bound (collate, fetch and "
        "the loader's overhead take CPU too; `iobench recommend --results` adds what a sweep measured)",
    )
