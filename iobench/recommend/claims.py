"""The published claims recommend tests, each as what it claims.

The storage table of the vendor-style write-up the project grew from (quoted in docs/recommend.md,
"Published claims") claims, for each range of dataset sizes, a *setup* — a tier together with its
cache — and the rate that setup delivered. Such a claim says nothing about the tier alone: "2 x NVMe
cache + object storage ~ 8 GB/s" is not the object store's rate, and "Ceph + memory cache ~ 5 GB/s"
is not Ceph's. So a claim never stands in for one of the model's capacities; it is checked against
the model's answer (hypotheses.py), and enters the model only where the user says it is what they
measured (:func:`as_measured`: a delivered rate at the claim's sizes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .calibrate import Figure
from .rates import Delivered, MeasuredRates, SetupName
from .units import Units

WRITE_UP = "docs/recommend.md 'Published claims' (a vendor-style write-up: a hypothesis)"
TB = 1e12


@dataclass(frozen=True)
class Claim:
    """A setup and the rate it is claimed to deliver at dataset sizes from ``low`` to ``high``."""

    setup: SetupName  # local, object+nvme or ceph+ram in the write-up
    words: str  # as the write-up puts it
    low_bytes: float | None
    high_bytes: float | None
    bytes_per_s: float
    check_at_bytes: float  # one dataset size inside the range, where the claim is checked
    source: str = WRITE_UP
    # the drives a claim about local NVMe names (the model's NVMe array), else None
    nvme_devices: int | None = None

    @property
    def figure(self) -> Figure:
        return Figure(
            self.bytes_per_s,
            f"claimed: {self.words} ~ {self.bytes_per_s / 1e9:g} GB/s: {self.source}",
            origin="published",
        )

    def delivered(self, source: str) -> Delivered:
        return Delivered(
            self.setup, replace(self.figure, source=source, origin="given"), self.low_bytes, self.high_bytes
        )

    def sizes(self, units: Units | None = None) -> str:
        return self.delivered("").sizes(units)


# the write-up's table: under 1 TB, 1-10 TB, over 10 TB
WRITE_UP_TABLE = (
    Claim("local", "4 x NVMe RAID0", None, 1 * TB, 12e9, 0.5 * TB, nvme_devices=4),
    Claim("object+nvme", "2 x NVMe cache + object storage", 1 * TB, 10 * TB, 8e9, 5 * TB),
    Claim("ceph+ram", "Ceph + memory cache", 10 * TB, None, 5e9, 50 * TB),
)


def as_measured(claims: tuple[Claim, ...] = WRITE_UP_TABLE, why: str = "") -> MeasuredRates:
    """The claims taken as the user's own measurements, each as what it claims: a RAID0 of NVMe
    with no cache named is the NVMe array's own rate (any size that fits it); a tier with its cache
    is that setup's delivered rate at the claim's sizes only."""
    said = why or "the write-up's table, given as measured"
    tiers, delivered = {}, []
    for c in claims:
        if c.setup == "local":
            tiers["nvme"] = replace(
                c.figure, source=f"given: {said}: {c.words} ~ {c.bytes_per_s / 1e9:g} GB/s", origin="given"
            )
        else:
            delivered.append(
                c.delivered(f"given: {said}: {c.words} ~ {c.bytes_per_s / 1e9:g} GB/s at {c.sizes()}")
            )
    return MeasuredRates(tiers, tuple(delivered))
