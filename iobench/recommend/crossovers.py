"""Which option leads as the dataset grows, the sizes where the leader changes, and why.

The options are ranked (placements.rank_key) on a log grid of dataset sizes; between two grid points
with different leaders the boundary is found by bisection on the log of the size, so a change at
a capacity (the NVMe, the RAM cache) is reported at that capacity, not at the next grid point. Each
change carries the reason the new leader ranks above the old one just past the boundary
(reasons.why_ahead): a change back to an earlier leader is explained like any other.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from .calibrate import Calibration
from .placements import PlacementOption, Scenario, options
from .reasons import why_ahead

GRID_FROM, GRID_TO, PER_DECADE = 100e9, 100e12, 12
BISECTIONS = 40  # the log-size interval shrinks 2**40-fold: far below a byte


@dataclass(frozen=True)
class Leader:
    dataset_bytes: float
    option: str  # "<storage>, <decode>"
    au: float
    binding: str
    conditional: str = ""  # the leader's rates are not all known: what is missing


@dataclass(frozen=True)
class Crossover:
    dataset_bytes: float  # the smallest size at which ``to`` leads
    before: str
    to: str
    why: str  # why ``to`` ranks above ``before`` from this size
    conditional: str = ""  # ``to``'s rates are not all known: what is missing


def _ranked(s: Scenario, cal: Calibration | None, size: float) -> list[PlacementOption]:
    return options(replace(s, dataset_bytes=size), cal)


def grid(start: float = GRID_FROM, stop: float = GRID_TO, per_decade: int = PER_DECADE) -> list[float]:
    """Sizes from ``start`` to ``stop`` spaced evenly in log, ``per_decade`` per factor of 10."""
    if not 0 < start < stop:
        raise ValueError(f"crossover grid: need 0 < start ({start}) < stop ({stop})")
    steps = round(per_decade * math.log10(stop / start))
    return [start * (stop / start) ** (i / steps) for i in range(steps + 1)]


def crossovers(
    s: Scenario, cal: Calibration | None, sizes: list[float] | None = None
) -> tuple[list[Leader], list[Crossover]]:
    """The leader at each size of ``sizes`` (default: :func:`grid`) and every change of leader."""
    sizes = sizes or grid()
    leaders = [_ranked(s, cal, size)[0] for size in sizes]
    table = [
        Leader(size, o.label, o.prediction.au or 0.0, o.prediction.binding, o.conditional)
        for size, o in zip(sizes, leaders, strict=True)
    ]
    changes: list[Crossover] = []
    for (lo, a), (hi, b) in itertools.pairwise(zip(sizes, leaders, strict=True)):
        current = a.label
        while current != b.label:  # one or more changes in (lo, hi]: find each in turn
            left, right = math.log(lo), math.log(hi)
            for _ in range(BISECTIONS):
                mid = (left + right) / 2
                if _ranked(s, cal, math.exp(mid))[0].label == current:
                    left = mid
                else:
                    right = mid
            lo = math.exp(right)
            ranked = _ranked(s, cal, lo)
            was = next(o for o in ranked if o.label == current)
            changes.append(
                Crossover(
                    lo, current, ranked[0].label, why_ahead(ranked[0], was, s.units), ranked[0].conditional
                )
            )
            current = ranked[0].label
    return table, changes
