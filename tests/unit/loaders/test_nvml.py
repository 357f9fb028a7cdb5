"""loaders.observe.nvml over a fake NVML library (tests/fakenvml.py), and over this machine's real one."""

from __future__ import annotations

import re
import sys

import pytest

from loaders.observe.nvml import GpuInfo, GpuSample, Nvml, NvmlUnavailable, open_nvml, sysfs_bus_id
from tests.helpers.fakenvml import DRIVER_NOT_LOADED, GIB, LIBRARY_NOT_FOUND, FakeGpu, FakeNvmlLib, NVMLError


def _sysfs(tmp_path, numa: dict[str, str]) -> str:
    for bus_id, node in numa.items():
        d = tmp_path / "sys/bus/pci/devices" / bus_id
        d.mkdir(parents=True)
        (d / "numa_node").write_text(node + "\n")
    return str(tmp_path)


def test_bus_ids_take_the_sysfs_form():
    assert sysfs_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert sysfs_bus_id(b"00000000:E3:00.1") == "0000:e3:00.1"
    assert sysfs_bus_id("00010000:01:00.0") == "10000:01:00.0"  # a VMD domain keeps its digits


def test_gpus_are_described_with_their_link_and_numa_node(tmp_path):
    lib = FakeNvmlLib(
        [
            FakeGpu(bus_id="00000000:3B:00.0", gen=(1, 5), width=(16, 16)),  # idle GPUs drop to Gen1
            FakeGpu(name="NVIDIA A100-SXM4-40GB", bus_id="00000000:5E:00.0", memory_total=40 * GIB),
            FakeGpu(bus_id="00000000:86:00.0", gen=None, width=None),  # link queries not supported
        ]
    )
    root = _sysfs(tmp_path, {"0000:3b:00.0": "1", "0000:5e:00.0": "-1"})
    with Nvml(lib, sysfs_root=root) as nvml:
        gpus = nvml.gpus()
    assert gpus[0] == GpuInfo(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-00000000-0000-0000-0000-000000000000",
        memory_total_bytes=80 * GIB,
        bus_id="0000:3b:00.0",
        pcie_gen_current=1,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        numa_node=1,
    )
    assert (gpus[1].name, gpus[1].memory_total_bytes, gpus[1].numa_node) == (
        "NVIDIA A100-SXM4-40GB",
        40 * GIB,
        None,
    )
    assert gpus[2].bus_id == "0000:86:00.0" and gpus[2].numa_node is None  # no sysfs entry
    assert (gpus[2].pcie_gen_current, gpus[2].pcie_gen_max, gpus[2].pcie_width_max) == (None, None, None)
    assert lib.shutdowns == 1


def test_sample_reports_utilisation_memory_and_pcie_bytes():
    lib = FakeNvmlLib(
        [
            FakeGpu(utilization=87, memory_used=30 * GIB, pcie_kib_per_s=(1000, 250_000)),
            FakeGpu(utilization=0, pcie_kib_per_s=None),
        ]
    )
    nvml = Nvml(lib)
    first, second = nvml.sample()
    assert first == GpuSample(0, 87.0, 30 * GIB, 80 * GIB, 1000 * 1024.0, 250_000 * 1024.0)
    assert (second.pcie_tx_bytes_per_s, second.pcie_rx_bytes_per_s) == (None, None)
    nvml.close()
    nvml.close()
    assert lib.shutdowns == 1


def test_a_gpu_nvml_cannot_answer_for_is_named(monkeypatch):
    lib = FakeNvmlLib([FakeGpu(), FakeGpu(bus_id="00000000:5E:00.0")])
    answer = lib.nvmlDeviceGetMemoryInfo

    def memory(handle: int):
        if handle == 1:
            raise NVMLError("GPU is lost")
        return answer(handle)

    monkeypatch.setattr(lib, "nvmlDeviceGetMemoryInfo", memory)
    with Nvml(lib) as nvml:
        with pytest.raises(NvmlUnavailable, match="GPU 1: NVML could not describe it: GPU is lost"):
            nvml.gpus()
        with pytest.raises(NvmlUnavailable, match="GPU 1: NVML could not read it: GPU is lost"):
            nvml.sample()


@pytest.mark.parametrize(
    ("lib", "says"),
    [
        (FakeNvmlLib([], init_error=LIBRARY_NOT_FOUND), "libnvidia-ml.so.1 was not found"),
        (FakeNvmlLib([], init_error=DRIVER_NOT_LOADED), "not loaded"),
        (FakeNvmlLib([]), "found no GPU"),
    ],
)
def test_unavailable_says_why_and_open_nvml_returns_none(lib, says):
    with pytest.raises(NvmlUnavailable, match=says):
        Nvml(lib)
    assert open_nvml(lib) is None
    assert not lib.initialised  # a session that found no GPU was shut down again


def test_missing_pynvml_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    with pytest.raises(NvmlUnavailable, match="pip install nvidia-ml-py"):
        Nvml()
    assert open_nvml() is None


def test_this_machine_gives_gpus_or_a_reason():
    try:
        nvml = Nvml()
    except NvmlUnavailable as exc:
        assert re.search(r"pip install nvidia-ml-py|NVIDIA driver|NVML", str(exc)), str(exc)
        return
    with nvml:
        gpus, samples = nvml.gpus(), nvml.sample()
    assert gpus and len(samples) == len(gpus)
    assert all(re.fullmatch(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", g.bus_id) for g in gpus)
    assert all(
        g.memory_total_bytes > 0 and 0 <= s.utilization_pct <= 100 for g, s in zip(gpus, samples, strict=True)
    )
