"""What a stream's readers (its DataLoader workers, or the loop's own process without workers) did
over an interval: sums over the batches they finished in it, and the same per sample.

A sample's time in the dataset splits three ways: CPU (decoding, augmenting: the work), runnable
but waiting for a core (too few cores), and the rest, blocked (storage, a sleep, a lock).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoaderWork:
    readers: int
    seconds: float
    batches: int
    samples: int
    get_wall_s: float
    get_cpu_s: float
    get_runq_s: float
    collate_wall_s: float
    collate_cpu_s: float
    collate_runq_s: float
    busy_s: float  # the readers' time inside fetch, within the interval
    rchar: int  # bytes their read calls returned
    read_bytes: int  # bytes read from block devices

    def per_sample_ms(self, seconds: float) -> float:
        return 1000.0 * seconds / self.samples if self.samples else 0.0

    @property
    def blocked_ms(self) -> float:
        """Per sample, in the dataset neither on a core nor waiting for one: storage, sleeps, locks."""
        return self.per_sample_ms(max(0.0, self.get_wall_s - self.get_cpu_s - self.get_runq_s))

    @property
    def cpu_ms(self) -> float:
        return self.per_sample_ms(self.get_cpu_s)

    @property
    def runq_ms(self) -> float:
        return self.per_sample_ms(self.get_runq_s + self.collate_runq_s)

    @property
    def get_ms(self) -> float:
        return self.per_sample_ms(self.get_wall_s)

    @property
    def collate_ms(self) -> float:
        return self.per_sample_ms(self.collate_wall_s)

    @property
    def busy(self) -> float:
        """The readers' share of the interval spent making batches."""
        return self.busy_s / (self.seconds * self.readers) if self.seconds > 0 and self.readers else 0.0

    @property
    def cores(self) -> float:
        """The cores the readers' making of batches used."""
        return (self.get_cpu_s + self.collate_cpu_s) / self.seconds if self.seconds > 0 else 0.0

    @property
    def bytes_per_sample(self) -> float:
        return self.rchar / self.samples if self.samples else 0.0

    @property
    def capacity(self) -> float | None:
        """Samples/s the readers make when they never wait to be asked: readers ÷ their time per sample."""
        per = self.busy_s / self.samples if self.samples else 0.0
        return self.readers / per if per > 0 else None


def loader_work(fetches: list[Any], start: float, end: float, readers: int) -> LoaderWork | None:
    """The batches that were finished in [start, end]; None when there were none."""
    inside = [f for f in fetches if start <= f.t1 <= end]
    if not inside:
        return None
    return LoaderWork(
        readers=max(1, readers),
        seconds=end - start,
        batches=len(inside),
        samples=sum(int(f.samples) for f in inside),
        get_wall_s=sum(f.get_wall for f in inside),
        get_cpu_s=sum(f.get_cpu for f in inside),
        get_runq_s=sum(f.get_runq for f in inside),
        collate_wall_s=sum(f.collate_wall for f in inside),
        collate_cpu_s=sum(f.collate_cpu for f in inside),
        collate_runq_s=sum(f.collate_runq for f in inside),
        busy_s=sum(f.t1 - max(f.t0, start) for f in inside),
        rchar=sum(int(f.rchar) for f in inside),
        read_bytes=sum(int(f.read_bytes) for f in inside),
    )
