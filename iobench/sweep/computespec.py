"""An emulated accelerator's ``compute:`` in a sweep file: how its device time varies step to step.

    compute: {dist: gamma, cv: 0.2}           # any of accelerators/jitter.py's DISTS; seed: the run's
    compute: {dist: lognormal, cv: calibrated, seed: 7}
    compute: {stdev: 0.02}                    # DLIO's computation_time_stdev, seconds: normal

``cv: calibrated`` takes the spread of the model's step that ``iobench calibrate`` measured on this
host (accelerators/hostcost.py); DLIO's form needs a demand with a computation time per step
(``demand: mlperf_storage``), which the stdev is a fraction of.
"""

from __future__ import annotations

from typing import Any, cast

from iobench.accelerators.demand import Demand
from iobench.accelerators.jitter import check
from iobench.results.choices import ComputeDist
from iobench.results.spec import ComputeSpec
from iobench.sweep.checks import ConfigError, check_keys, integer


def parse_compute(raw: Any, where: str, demand: Demand | None, run_seed: int) -> ComputeSpec | None:
    """The ``compute:`` mapping at ``where`` for an emulated accelerator of ``demand`` (None: no
    ``compute:``, a constant device time)."""
    if raw is None:
        return None
    d = check_keys(raw, {"dist": None, "cv": None, "stdev": None, "seed": None}, where)
    seed = integer(d["seed"], f"{where}.seed", optional=True)
    seed = run_seed if seed is None else seed
    if d["stdev"] is not None:
        return _dlio_form(d, where, demand, seed)
    dist = d["dist"] or "gamma"
    cv = d["cv"] if d["cv"] is not None else (1.0 if dist == "exponential" else None)
    if cv is None:
        raise ConfigError(
            f"{where}.cv: missing; give the device time's sd / mean, e.g. cv: 0.1, or cv: calibrated"
        )
    source = "given in the sweep file"
    if cv == "calibrated":
        cv, source = _calibrated(where, demand)
    if problem := check(dist, cv):
        raise ConfigError(f"{where}.{problem}")
    # check() refused any dist outside jitter.DISTS, which are ComputeDist's values
    return ComputeSpec(dist=cast(ComputeDist, dist), cv=float(cv), seed=seed, source=source)


def _dlio_form(d: dict, where: str, demand: Demand | None, seed: int) -> ComputeSpec:
    """DLIO's ``computation_time_stdev``: a normal of that sd around the table's computation time."""
    if d["cv"] is not None or d["dist"] not in (None, "normal"):
        raise ConfigError(f"{where}: stdev is DLIO's form (a normal); give either stdev or dist and cv")
    if demand is None or not demand.step_s:
        raise ConfigError(
            f"{where}.stdev: DLIO's stdev is of its computation time per step, and this demand has none "
            "(demand: mlperf_storage has one); give cv instead"
        )
    stdev = d["stdev"]
    if isinstance(stdev, bool) or not isinstance(stdev, int | float) or stdev < 0:
        raise ConfigError(f"{where}.stdev={stdev!r}: expected seconds >= 0")
    cv = stdev / demand.step_s
    if problem := check("normal", cv):
        raise ConfigError(f"{where}.stdev={stdev!r} (of {demand.step_s} s): {problem}")
    source = f"DLIO's computation_time_stdev {stdev} s of its computation_time {demand.step_s} s"
    return ComputeSpec(dist="normal", cv=cv, seed=seed, source=source)


def _calibrated(where: str, demand: Demand | None) -> tuple[float, str]:
    from iobench.accelerators.hostcost import host_cost

    model = demand.model if demand else "?"
    try:  # at calibrate's default batch: host_cost takes the batch measured nearest it
        cost = host_cost(model, 64)
    except ValueError:
        cost = None
    if cost is None or cost.kind != "calibration" or cost.step_cv is None:
        raise ConfigError(
            f"{where}.cv=calibrated: no calibration of {model}'s step spread on this host; run "
            f"`iobench calibrate --model {model}` first, or give a number"
        )
    return cost.step_cv, f"this host's calibration: the cv of {model}'s step alone ({cost.source})"
