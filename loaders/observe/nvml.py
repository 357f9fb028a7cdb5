"""NVIDIA GPUs through NVML: what each one is (model, memory, PCIe link, NUMA node) and how busy it is.

One small layer over ``pynvml`` (``pip install nvidia-ml-py``) shared by ``iobench inspect`` and the
loaders' Prometheus exporter. ``lib`` may be any module-like object with pynvml's function names, which
is how the tests run it without a GPU. NVML reports a GPU's bus id as ``00000000:3B:00.0``; it is turned
into the lower-case form Linux uses under /sys/bus/pci/devices, which is also where the NUMA node is
read (NVML's own NUMA query needs a recent driver; sysfs has it on every kernel).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

PCIE_UTIL_TX_BYTES = 0  # pynvml.NVML_PCIE_UTIL_TX_BYTES: the counter ids NVML defines
PCIE_UTIL_RX_BYTES = 1


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here; the message says why and what to do."""


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    bus_id: str  # sysfs form, 0000:3b:00.0
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_width_current: int | None
    pcie_width_max: int | None
    numa_node: int | None


@dataclass(frozen=True)
class GpuSample:
    index: int
    utilization_pct: float
    memory_used_bytes: int
    memory_total_bytes: int
    pcie_tx_bytes_per_s: float | None
    pcie_rx_bytes_per_s: float | None


def sysfs_bus_id(nvml_bus_id: str | bytes) -> str:
    """``00000000:3B:00.0`` (NVML) → ``0000:3b:00.0`` (the name under /sys/bus/pci/devices)."""
    text = nvml_bus_id.decode() if isinstance(nvml_bus_id, bytes) else nvml_bus_id
    domain, bus, device_function = text.strip().split(":")
    # The kernel prints the domain with %04x, so a domain above 0xffff (VMD) keeps its extra digits.
    return f"{int(domain, 16):04x}:{bus.lower()}:{device_function.lower()}"


def _text(value: str | bytes) -> str:
    # pynvml returns str since 11.x and bytes before; fakes and old versions may give either.
    return value.decode() if isinstance(value, bytes) else value


def _numa_node(sysfs_root: str, bus_id: str) -> int | None:
    path = os.path.join(sysfs_root, "sys/bus/pci/devices", bus_id, "numa_node")
    try:
        with open(path) as f:
            node = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None  # -1: the platform does not say (one node, or a VM)


def _why_unavailable(err: Exception) -> str:
    reason = str(err)
    if "Library Not Found" in reason:
        return "no NVIDIA driver: libnvidia-ml.so.1 was not found; install the driver, or run on a GPU host"
    if "Driver Not Loaded" in reason:
        return "the NVIDIA driver is installed but not loaded; check `nvidia-smi` and `lsmod | grep nvidia`"
    return f"NVML failed to start: {reason}"


class Nvml:
    """An initialised NVML session; use as a context manager or call ``close()``."""

    def __init__(self, lib: Any = None, sysfs_root: str = "/") -> None:
        if lib is None:
            try:
                import pynvml
            except ImportError:
                raise NvmlUnavailable(
                    "pynvml is not installed: `pip install nvidia-ml-py` to read NVIDIA GPUs"
                ) from None
            lib = pynvml
        self._lib = lib
        self._sysfs_root = sysfs_root
        self._error = getattr(lib, "NVMLError", Exception)
        try:
            lib.nvmlInit()
        except self._error as err:
            raise NvmlUnavailable(_why_unavailable(err)) from err
        self._open = True
        try:
            count = lib.nvmlDeviceGetCount()
            self._handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except self._error as err:
            self.close()
            raise NvmlUnavailable(f"NVML could not list the GPUs: {err}") from err
        if not self._handles:
            self.close()
            raise NvmlUnavailable("NVML is running but found no GPU")

    def _optional(self, name: str, handle: Any, *args: Any) -> Any:
        # Link queries are "Not Supported" on some virtualised or older GPUs: unknown, not fatal.
        try:
            return getattr(self._lib, name)(handle, *args)
        except self._error:
            return None

    def _each(self, doing: str, read: Callable[[Any], tuple]) -> Iterator[tuple[int, Any, tuple]]:
        """Each GPU's index, handle and what ``read(handle)`` found: queries every GPU answers, so an
        NVML error in them is NvmlUnavailable naming the GPU and what NVML was ``doing``."""
        for index, handle in enumerate(self._handles):
            try:
                found = read(handle)
            except self._error as err:
                raise NvmlUnavailable(f"GPU {index}: NVML could not {doing}: {err}") from err
            yield index, handle, found

    def _identity(self, handle: Any) -> tuple[str, str, Any, str]:
        lib = self._lib
        return (
            _text(lib.nvmlDeviceGetName(handle)),
            _text(lib.nvmlDeviceGetUUID(handle)),
            lib.nvmlDeviceGetMemoryInfo(handle),
            sysfs_bus_id(lib.nvmlDeviceGetPciInfo(handle).busId),
        )

    def gpus(self) -> list[GpuInfo]:
        return [
            GpuInfo(
                index=index,
                name=name,
                uuid=uuid,
                memory_total_bytes=int(memory.total),
                bus_id=bus_id,
                pcie_gen_current=self._optional("nvmlDeviceGetCurrPcieLinkGeneration", handle),
                pcie_gen_max=self._optional("nvmlDeviceGetMaxPcieLinkGeneration", handle),
                pcie_width_current=self._optional("nvmlDeviceGetCurrPcieLinkWidth", handle),
                pcie_width_max=self._optional("nvmlDeviceGetMaxPcieLinkWidth", handle),
                numa_node=_numa_node(self._sysfs_root, bus_id),
            )
            for index, handle, (name, uuid, memory, bus_id) in self._each("describe it", self._identity)
        ]

    def _reading(self, handle: Any) -> tuple[Any, Any]:
        return self._lib.nvmlDeviceGetUtilizationRates(handle).gpu, self._lib.nvmlDeviceGetMemoryInfo(handle)

    def sample(self) -> list[GpuSample]:
        """One reading per GPU. NVML averages utilisation over its own sampling period (1/6 s to 1 s)."""
        samples = []
        for index, handle, (utilization, memory) in self._each("read it", self._reading):
            tx_kib = self._optional("nvmlDeviceGetPcieThroughput", handle, PCIE_UTIL_TX_BYTES)
            rx_kib = self._optional("nvmlDeviceGetPcieThroughput", handle, PCIE_UTIL_RX_BYTES)
            samples.append(
                GpuSample(
                    index=index,
                    utilization_pct=float(utilization),
                    memory_used_bytes=int(memory.used),
                    memory_total_bytes=int(memory.total),
                    # NVML counts PCIe throughput in KB/s, KB = 1024 bytes
                    pcie_tx_bytes_per_s=None if tx_kib is None else tx_kib * 1024.0,
                    pcie_rx_bytes_per_s=None if rx_kib is None else rx_kib * 1024.0,
                )
            )
        return samples

    def close(self) -> None:
        if self._open:
            self._open = False
            # shutting down a session that failed half-way: nothing is left to release
            with contextlib.suppress(self._error):
                self._lib.nvmlShutdown()

    def __enter__(self) -> Nvml:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_nvml(lib: Any = None) -> Nvml | None:
    """An NVML session, or None where there is no pynvml, no driver or no GPU."""
    try:
        return Nvml(lib)
    except NvmlUnavailable:
        return None
