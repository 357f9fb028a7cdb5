"""Host telemetry sampled beside the step loop: CPU per core, disk reads per device, memory."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil


@dataclass
class TelemetrySample:
    t: float  # perf_counter
    cpu_percent: list[float]
    mem_used_bytes: int
    mem_available_bytes: int
    disk_read_bytes: dict[str, int]  # cumulative, per device


@dataclass
class Telemetry:
    samples: list[TelemetrySample] = field(default_factory=list)

    def between(self, start: float, end: float) -> list[TelemetrySample]:
        return [s for s in self.samples if start <= s.t <= end]

    def disk_read_bytes(self, start: float, end: float) -> dict[str, int]:
        """Bytes the block devices delivered between two instants (nearest samples outside them)."""
        before = [s for s in self.samples if s.t <= start] or self.samples[:1]
        after = [s for s in self.samples if s.t >= end] or self.samples[-1:]
        if not before or not after:
            return {}
        a, b = before[-1].disk_read_bytes, after[0].disk_read_bytes
        return {dev: b[dev] - a.get(dev, 0) for dev in b if b[dev] - a.get(dev, 0) > 0}

    def mean_cpu_percent(self, start: float, end: float) -> list[float]:
        window = self.between(start, end)
        if not window:
            return []
        cores = len(window[0].cpu_percent)
        return [sum(s.cpu_percent[i] for s in window) / len(window) for i in range(cores)]


class TelemetrySampler:
    """A daemon thread sampling psutil every ``interval`` seconds while the cell runs."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.telemetry = Telemetry()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="iobench-telemetry", daemon=True)

    def _sample(self) -> None:
        mem = psutil.virtual_memory()
        disks = psutil.disk_io_counters(perdisk=True) or {}
        self.telemetry.samples.append(
            TelemetrySample(
                t=time.perf_counter(),
                cpu_percent=psutil.cpu_percent(percpu=True),
                mem_used_bytes=mem.used,
                mem_available_bytes=mem.available,
                disk_read_bytes={dev: c.read_bytes for dev, c in disks.items()},
            )
        )

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> Telemetry:
        psutil.cpu_percent(percpu=True)  # primes the counters: the first reading is since boot
        self._sample()
        self._thread.start()
        return self.telemetry

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
