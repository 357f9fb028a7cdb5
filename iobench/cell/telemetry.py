"""Telemetry sampled beside the step loop: the host's CPU per core and in all (host/cpuload.py),
memory and disk reads per device, the bytes the cell's own processes read and the CPU they used
(host/proctree.py), iobench's own CPU (the sweep's process and this sampler), and each GPU's
utilisation, memory and PCIe traffic where NVML is there (loaders/observe/nvml.py)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from iobench.host.cpuload import CpuSample, HostLoad, host_cpu, load_over, process_cpu_s
from iobench.host.proctree import ProcessTree
from loaders.observe import GpuSample, Nvml, NvmlUnavailable


@dataclass
class TelemetrySample:
    t: float  # perf_counter
    cpu_percent: list[float]
    mem_used_bytes: int
    mem_available_bytes: int
    disk_read_bytes: dict[str, int]  # cumulative, per device, host-wide
    # cumulative over the cell's process tree: read from block devices / returned by read calls;
    # None where the kernel's per-process I/O accounting is not readable
    process_read_bytes: int | None = None
    process_read_chars: int | None = None
    gpus: list[GpuSample] = field(default_factory=list)  # one per GPU; empty without NVML
    # the counters of the core budget: the host's busy and stolen time, the cell's process tree's,
    # the sweep's process and this sampler thread's (iobench's own); None: not read
    cpu: CpuSample | None = None


@dataclass(frozen=True)
class WindowTelemetry:
    """What the telemetry saw over a measured window (docs/method.md, Bytes read): the block devices'
    bytes host-wide, the cell's processes' reads, the tier's device's, the CPU per core, the GPUs'."""

    device_read_bytes: dict[str, int]  # per block device, host-wide
    device_read_bytes_per_s: float | None  # the cell's processes, from block devices
    read_call_bytes_per_s: float | None  # ... what their read calls returned, caches included
    cell_device_read_bytes: int | None  # the cell's processes from block devices, the whole repeat
    host_device_read_bytes_per_s: float | None  # the tier's device, every process on the host
    cpu_percent_per_core: tuple[float, ...]
    gpu_utilization_pct: float | None


@dataclass
class Telemetry:
    samples: list[TelemetrySample] = field(default_factory=list)

    def window(self, start: float, end: float, tier_device: str | None) -> WindowTelemetry:
        """The figures of [start, end] (and of the whole repeat, for the cell's device bytes);
        ``tier_device``: the block device the tier reads, where it names one."""
        return WindowTelemetry(
            device_read_bytes=self.disk_read_bytes(start, end),
            device_read_bytes_per_s=self.rate(start, end, lambda t: t.process_read_bytes),
            read_call_bytes_per_s=self.rate(start, end, lambda t: t.process_read_chars),
            cell_device_read_bytes=self.growth(lambda t: t.process_read_bytes),
            host_device_read_bytes_per_s=self.rate(
                start, end, lambda t: t.disk_read_bytes.get(tier_device, 0)
            )
            if tier_device
            else None,
            cpu_percent_per_core=tuple(self.mean_cpu_percent(start, end)),
            gpu_utilization_pct=self.mean_gpu_utilization(start, end),
        )

    def between(self, start: float, end: float) -> list[TelemetrySample]:
        return [s for s in self.samples if start <= s.t <= end]

    def _around(self, start: float, end: float) -> tuple[TelemetrySample, TelemetrySample] | None:
        """The last sample at or before ``start`` and the first at or after ``end`` (the nearest
        ones inside when the sampling started late or stopped early)."""
        before = [s for s in self.samples if s.t <= start] or self.samples[:1]
        after = [s for s in self.samples if s.t >= end] or self.samples[-1:]
        return (before[-1], after[0]) if before and after else None

    def disk_read_bytes(self, start: float, end: float) -> dict[str, int]:
        """Bytes the block devices delivered between two instants, host-wide."""
        pair = self._around(start, end)
        if pair is None:
            return {}
        a, b = pair[0].disk_read_bytes, pair[1].disk_read_bytes
        return {dev: b[dev] - a.get(dev, 0) for dev in b if b[dev] - a.get(dev, 0) > 0}

    def rate(self, start: float, end: float, read: Callable[[TelemetrySample], int | None]) -> float | None:
        """A cumulative counter's growth per second between two instants: over the span of the
        samples that bracket them, so the bytes and the seconds cover the same time."""
        pair = self._around(start, end)
        if pair is None:
            return None
        a, b = read(pair[0]), read(pair[1])
        span = pair[1].t - pair[0].t
        return (b - a) / span if a is not None and b is not None and span > 0 else None

    def growth(self, read: Callable[[TelemetrySample], int | None]) -> int | None:
        """A cumulative counter's growth from the first sample to the last (the whole repeat)."""
        if not self.samples:
            return None
        a, b = read(self.samples[0]), read(self.samples[-1])
        return b - a if a is not None and b is not None else None

    def mean_cpu_percent(self, start: float, end: float) -> list[float]:
        window = self.between(start, end)
        if not window:
            return []
        cores = len(window[0].cpu_percent)
        return [sum(s.cpu_percent[i] for s in window) / len(window) for i in range(cores)]

    def load(self, start: float, end: float, usable: int) -> HostLoad | None:
        """The host's load over [start, end], for the core budget (host/cpuload.py)."""
        return load_over([s.cpu for s in self.samples if s.cpu is not None], start, end, usable)

    def mean_gpu_utilization(self, start: float, end: float) -> float | None:
        """NVML's utilisation (% of time a kernel ran), averaged over the GPUs and the samples
        between two instants; None without NVML."""
        values = [g.utilization_pct for s in self.between(start, end) for g in s.gpus]
        return sum(values) / len(values) if values else None


class TelemetrySampler:
    """A daemon thread sampling every ``interval`` seconds while the cell runs. ``root`` is the
    process whose tree is the cell's (this process, or the launcher of a multi-rank cell's ranks)."""

    def __init__(
        self,
        interval: float = 0.25,
        root: int | None = None,
        nvml_lib: object = None,
        sweep: int | None = None,
    ) -> None:
        self.interval = interval
        self.sweep = sweep  # the sweep's process: iobench's own CPU, with this thread's
        self._thread_cpu = 0.0
        try:
            self.nvml: Nvml | None = Nvml(nvml_lib)
        except NvmlUnavailable:  # no pynvml, no driver or no GPU: no GPU figures
            self.nvml = None
        self.telemetry = Telemetry()
        try:
            self.tree: ProcessTree | None = ProcessTree(root if root is not None else os.getpid())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self.tree = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="iobench-telemetry", daemon=True)

    def _sample(self) -> None:
        mem = psutil.virtual_memory()
        disks = psutil.disk_io_counters(perdisk=True) or {}
        tree = self.tree.totals() if self.tree is not None else None
        sweep = process_cpu_s(self.sweep) if self.sweep is not None else None
        self.telemetry.samples.append(
            TelemetrySample(
                t=time.perf_counter(),
                cpu_percent=psutil.cpu_percent(percpu=True),
                mem_used_bytes=mem.used,
                mem_available_bytes=mem.available,
                disk_read_bytes={dev: c.read_bytes for dev, c in disks.items()},
                process_read_bytes=int(tree["read_bytes"]) if tree else None,
                process_read_chars=int(tree["read_chars"]) if tree else None,
                gpus=self._gpus(),
                cpu=CpuSample(
                    host=host_cpu(),
                    job_s=tree["user"] + tree["system"] if tree else None,
                    own_outside_s=sweep or 0.0,
                    own_inside_s=self._thread_cpu,
                ),
            )
        )

    def _gpus(self) -> list[GpuSample]:
        if self.nvml is None:
            return []
        try:
            return self.nvml.sample()
        except NvmlUnavailable:  # a GPU that stops answering ends the GPU telemetry, not the cell
            self.nvml.close()
            self.nvml = None
            return []

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()
            self._thread_cpu = time.thread_time()

    def __enter__(self) -> Telemetry:
        psutil.cpu_percent(percpu=True)  # primes the counters: the first reading is since boot
        self._sample()
        self._thread.start()
        return self.telemetry

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        if self.nvml is not None:
            self.nvml.close()
