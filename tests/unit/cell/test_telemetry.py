"""The cell's telemetry (cell/telemetry.py): NVML over the fake NVML library, and the host's CPU counters
that make a window's core budget."""

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


def test_the_core_budget_splits_the_hosts_busy_cpu_between_the_job_iobench_and_the_rest():
    from iobench.analysis.cores import core_budget
    from iobench.host.cpuload import CpuSample, HostCpu, load_over

    # 10 s: the host busy 1.8 cores, the cell's tree 1.2 (its trainer process 0.5 of it, of which the
    # telemetry thread 0.02), the sweep 0.05
    a = CpuSample(HostCpu(100.0, 0.0, 0.0), job_s=0.0, own_outside_s=0.0, own_inside_s=0.0)
    b = CpuSample(HostCpu(110.0, 18.0, 1.0), job_s=12.0, own_outside_s=0.5, own_inside_s=0.2)
    load = load_over([a, b], 100.0, 110.0, usable=2)
    assert load is not None and load.busy == pytest.approx(1.8) and load.steal == pytest.approx(0.1)
    budget = core_budget(load, window_s=10.0, trainer_process_cpu_s=5.0)
    assert budget is not None
    assert budget.trainer == pytest.approx(0.48) and budget.readers == pytest.approx(0.7)
    assert budget.own == pytest.approx(0.07) and budget.others == pytest.approx(0.55)
    assert budget.used == pytest.approx(1.8) and budget.spent  # 1.8 of 2: spent
    # readers in the trainer's process (no workers) are the readers', not the trainer's
    inside = core_budget(load, window_s=10.0, trainer_process_cpu_s=12.0, readers_in_process_cpu_s=9.0)
    assert (
        inside is not None and inside.readers == pytest.approx(0.9) and inside.trainer == pytest.approx(0.28)
    )
    assert core_budget(replace_job(load), window_s=10.0, trainer_process_cpu_s=5.0) is None


def replace_job(load):
    from dataclasses import replace

    return replace(load, job=None)


def test_a_windows_reads_are_the_samples_that_bracket_it():
    from iobench.cell.telemetry import Telemetry, TelemetrySample

    def at(t: float, nvme: int, tree: int, chars: int) -> TelemetrySample:
        return TelemetrySample(t, [50.0, 10.0], 0, 0, {"nvme0n1": nvme, "sda": 7}, tree, chars)

    telemetry = Telemetry(
        [at(0.0, 0, 0, 0), at(1.0, 100, 40, 400), at(3.0, 500, 240, 2400), at(4.0, 600, 300, 3000)]
    )
    seen = telemetry.window(1.0, 3.0, "nvme0n1")
    assert seen.device_read_bytes == {"nvme0n1": 400}  # sda read nothing in the window
    assert seen.host_device_read_bytes_per_s == pytest.approx(200.0)
    assert seen.device_read_bytes_per_s == pytest.approx(100.0)
    assert seen.read_call_bytes_per_s == pytest.approx(1000.0)
    assert seen.cell_device_read_bytes == 300  # the whole repeat's, not the window's
    assert seen.cpu_percent_per_core == (50.0, 10.0) and seen.gpu_utilization_pct is None
    assert telemetry.window(1.0, 3.0, None).host_device_read_bytes_per_s is None  # no device named
