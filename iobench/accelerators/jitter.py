"""An emulated accelerator's compute time as a distribution: each step draws its device time.

A real training step is not a constant, and in synchronous training every step waits for the
slowest rank's compute as well as its data; a constant sleep hides that. Each step's device time is
its mean (the batch over the demand's rate) times a factor of mean 1 and the configured coefficient
of variation (sd / mean), drawn from the named distribution (docs/method.md, *Compute jitter*).

The draws are seeded: rank r of a cell draws from ``numpy.random.SeedSequence([seed, r])``, so a
cell's draws repeat with its seed and its ranks' draws differ (their slowest one is what
synchronous training pays). No torch: validating a sweep file reads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from iobench.results.spec import ComputeSpec

DISTS = ("constant", "normal", "gamma", "lognormal", "uniform", "exponential")
# beyond these a distribution cannot keep mean 1 with non-negative draws (uniform), or its cut at 0
# moves the mean by more than 1e-4 (normal: take gamma or lognormal for wider spreads)
MAX_CV = {"normal": 0.3, "uniform": 1 / math.sqrt(3)}


def check(dist: str, cv: float) -> str | None:
    """What is wrong with ``dist`` at ``cv``, or None."""
    if dist not in DISTS:
        return f"dist={dist!r}: allowed values are {', '.join(DISTS)}"
    if isinstance(cv, bool) or not isinstance(cv, int | float) or not math.isfinite(cv) or cv < 0:
        return f"cv={cv!r}: expected a number >= 0 (the device time's sd / mean)"
    if dist == "exponential" and cv != 1:
        return f"cv={cv!r}: an exponential's cv is 1 (leave cv out, or take gamma for another)"
    if dist == "constant" and cv != 0:
        return f"cv={cv!r}: a constant's cv is 0 (name a distribution: {', '.join(DISTS[1:])})"
    if cv > MAX_CV.get(dist, math.inf):
        return f"cv={cv!r}: {dist} allows at most {MAX_CV[dist]:.3g} (take gamma or lognormal)"
    return None


def factors(spec: ComputeSpec, rank: int = 0) -> Callable[[], float]:
    """A draw of the device time's factor (mean 1, cv ``spec.cv``) per call, rank ``rank``'s stream."""
    rng = np.random.default_rng(np.random.SeedSequence([spec.seed, rank]))
    c = spec.cv
    if spec.dist == "constant" or c == 0:
        return lambda: 1.0
    if spec.dist == "normal":
        return lambda: max(0.0, rng.normal(1.0, c))
    if spec.dist == "gamma":  # shape 1/c², scale c²: mean 1, sd c
        return lambda: float(rng.gamma(1 / c**2, c**2))
    if spec.dist == "lognormal":
        sigma = math.sqrt(math.log1p(c**2))
        return lambda: float(rng.lognormal(-(sigma**2) / 2, sigma))
    if spec.dist == "uniform":
        half = math.sqrt(3) * c
        return lambda: float(rng.uniform(1 - half, 1 + half))
    if spec.dist == "exponential":
        return lambda: float(rng.exponential(1.0))
    raise ValueError(check(spec.dist, c) or f"dist={spec.dist!r}")
