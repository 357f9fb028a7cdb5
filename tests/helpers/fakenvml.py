"""A fake NVML library for tests: pynvml's function names over GPUs described in Python.

Only the calls `loaders.observe.nvml` makes exist, so a new call there fails loudly here. Errors are
raised as this module's NVMLError with NVML's own messages, the way pynvml raises them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

GIB = 2**30
LIBRARY_NOT_FOUND = "NVML Shared Library Not Found"
DRIVER_NOT_LOADED = "Driver Not Loaded"
NOT_SUPPORTED = "Not Supported"


class NVMLError(Exception):
    pass


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    bus_id: str = "00000000:19:00.0"  # NVML's form: 8-digit domain, upper case
    memory_total: int = 80 * GIB
    memory_used: int = 0
    gen: tuple[int, int] | None = (5, 5)  # (current, max); None: "Not Supported"
    width: tuple[int, int] | None = (16, 16)
    utilization: int = 0
    pcie_kib_per_s: tuple[int, int] | None = (0, 0)  # (tx, rx) in KB/s


class FakeNvmlLib:
    NVMLError = NVMLError

    def __init__(self, gpus: list[FakeGpu], init_error: str | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.initialised = False
        self.shutdowns = 0

    def _gpu(self, handle: int) -> FakeGpu:
        if not self.initialised:
            raise NVMLError("Uninitialized")
        return self.gpus[handle]

    def nvmlInit(self) -> None:
        if self.init_error:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.initialised = False
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus) if self.initialised else 0

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._gpu(index)
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return f"GPU-00000000-0000-0000-0000-{handle:012d}".encode()  # bytes, as older pynvml returns

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        g = self._gpu(handle)
        return SimpleNamespace(total=g.memory_total, used=g.memory_used, free=g.memory_total - g.memory_used)

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._gpu(handle).bus_id.encode())

    def _link(self, handle: int, field: str, which: int) -> int:
        value = getattr(self._gpu(handle), field)
        if value is None:
            raise NVMLError(NOT_SUPPORTED)
        return value[which]

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return self._link(handle, "gen", 0)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return self._link(handle, "gen", 1)

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return self._link(handle, "width", 0)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return self._link(handle, "width", 1)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._gpu(handle).utilization, memory=0)

    def nvmlDeviceGetPcieThroughput(self, handle: int, counter: int) -> int:
        return self._link(handle, "pcie_kib_per_s", counter)
