"""NVML in the cell's telemetry (cell/telemetry.py), over the fake NVML library."""

from __future__ import annotations

import pytest

from iobench.cell.telemetry import TelemetrySampler
from tests.helpers.fakenvml import GIB, FakeGpu, FakeNvmlLib


def test_gpu_utilisation_memory_and_pcie_are_sampled_where_nvml_is():
    lib = FakeNvmlLib(
        [FakeGpu(utilization=30, memory_used=4 * GIB, pcie_kib_per_s=(10, 20)), FakeGpu(utilization=50)]
    )
    sampler = TelemetrySampler(interval=0.01, nvml_lib=lib)
    with sampler as telemetry:
        pass
    last = telemetry.samples[-1]
    assert [g.utilization_pct for g in last.gpus] == [30.0, 50.0]
    assert last.gpus[0].memory_used_bytes == 4 * GIB and last.gpus[0].pcie_rx_bytes_per_s == 20 * 1024.0
    span = (telemetry.samples[0].t, telemetry.samples[-1].t)
    assert telemetry.mean_gpu_utilization(*span) == pytest.approx(40.0)
    assert lib.shutdowns == 1  # the session ends with the sampler


def test_no_nvml_means_no_gpu_figures():
    lib = FakeNvmlLib([], init_error="NVML Shared Library Not Found")
    with TelemetrySampler(interval=0.01, nvml_lib=lib) as telemetry:
        pass
    assert all(s.gpus == [] for s in telemetry.samples)
    assert telemetry.mean_gpu_utilization(0.0, float("inf")) is None
