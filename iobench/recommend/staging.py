"""The copy an option needs before training starts: the dataset (or a node's share of it) onto
every node's NVMe, read from where it lives now at that store's rate per node. A shard cache needs
no copy: it fills during the first epoch, which the option's first-epoch AU prices."""

from __future__ import annotations

from dataclasses import dataclass

from .calibrate import Figure
from .scenario import Scenario
from .units import duration

SOURCE_NAMES = {"object": "the object store", "ceph": "Ceph", "pfs": "the parallel file system"}


@dataclass(frozen=True)
class Staging:
    bytes_per_node: float
    seconds: float | None  # None: no rate is known for where the dataset comes from
    source: str  # where from, at what rate, or what to give

    def words(self, s: Scenario) -> str:
        size = s.units.size(self.bytes_per_node)
        if self.seconds is None:
            return f"{size} onto each node: {self.source}"
        return f"{size} onto each node in {duration(self.seconds)} ({self.source})"


def staging(s: Scenario, bytes_per_node: float, sources: dict[str, Figure]) -> Staging:
    """Copying ``bytes_per_node`` onto every node from the fastest store whose rate is known (each
    node at that store's per-node rate, all at once)."""
    if not sources:
        return Staging(
            bytes_per_node,
            None,
            "time not known: give the rate of where the dataset comes from (--tier-rate object=, ceph= or pfs=RATE)",
        )
    key, f = max(sources.items(), key=lambda kv: kv[1].value)
    together = (
        f"; the {s.nodes} nodes read {s.units.size(bytes_per_node * s.nodes)} from it together"
        if s.nodes > 1
        else ""
    )
    return Staging(
        bytes_per_node,
        bytes_per_node / f.value,
        f"from {SOURCE_NAMES[key]} at {s.units.rate(f.value)} per node [{f.origin}]{together}",
    )
