"""One attribution from two methods: the differential ceilings and the online per-stage timers.

The differential method names the binding part of the pipeline from rates measured in isolation
(iobench/cell/diagnosis/ceilings.py); the online method from the time each reader spends per sample in each
stage (verdict.py). They are independent measurements of the same question, so disagreement is
itself a finding and is reported, never hidden.

Where the time went is not this module's: the steps' ledger accounts for every second of the wall
(analysis/ledger.py, the summary's ``split``).
"""

from __future__ import annotations

import math
from typing import cast

from iobench.results.choices import DifferentialPart, values
from iobench.results.figures import Attribution, Capacity, Verdict

from .verdict import AU_TARGET

# the parts a ceiling is measured for; "cores": what the usable cores feed when the loader and the
# step share them (analysis/cores.py, shared_ceiling), beside the loader alone and the step alone
PARTS = values(DifferentialPart)
# what the online verdict's "bound" is called in the differential method: a trainer starved of its
# host falls short of its step alone, so host-bound is the step's side
ONLINE_TO_PART = {
    "accelerator": "accelerator",
    "host": "accelerator",
    "prep": "prep",
    "fetch": "fetch",
    "cores": "cores",
}
AGREE_TOLERANCE = 0.15


def input_ceiling(prep: float, fetch: float, measured: float) -> float:
    """The most samples/s the input pipeline delivers: the lower of the prep and fetch ceilings, but
    never less than the cell measured (it delivered that; a ceiling run at a busier moment of the
    host that timed less cannot be the input's limit, and the capacity answer then says no less
    than the cell's AU)."""
    return max(min(prep, fetch), measured)


def capacity(
    input_ceiling: float,
    per_accelerator: float,
    *,
    takes: float | None = None,
    target: float = AU_TARGET,
) -> Capacity:
    """The largest accelerator count this input pipeline keeps at >= ``target`` AU (MLPerf
    Storage's rule). Each accelerator demands ``per_accelerator`` but its trainer takes at most
    ``takes`` (its rate alone; default: the demand), so AU(n) = min(ceiling / n, takes) / demand:
    n = floor(ceiling / (target x demand)) where the trainer alone reaches the target, else none."""
    takes = per_accelerator if takes is None else min(takes, per_accelerator)

    def au(n: int) -> float:
        return min(input_ceiling / n, takes) / per_accelerator

    reachable = takes >= target * per_accelerator
    n = math.floor(input_ceiling / (target * per_accelerator) + 1e-9) if reachable else 0
    return Capacity(
        max_accelerators=n,
        input_ceiling_samples_per_s=input_ceiling,
        demand_per_accelerator=per_accelerator,
        predicted_au_at_max=au(n) if n else None,
        predicted_au_at_max_plus_one=au(n + 1),
        trainer_takes_per_accelerator=takes,
    )


def combine(
    ceilings: dict[str, float],
    online: Verdict,
    *,
    measured_samples_per_s: float,
    au: float,
    capacity: Capacity | None = None,
) -> Attribution:
    present = {k: v for k, v in ceilings.items() if k in PARTS and v and v > 0}
    if not present:
        raise ValueError("no ceiling was measured")
    binding = cast(DifferentialPart, min(present, key=present.__getitem__))  # one of PARTS
    predicted = present[binding]
    online_part = ONLINE_TO_PART.get(online.bound, "unknown")
    # close ceilings cannot be told apart by either method: within the tolerance both names are right
    near = {k for k, v in present.items() if v <= predicted * (1 + AGREE_TOLERANCE)}
    # the cores spent and the loader's CPU work are the same limit seen from two sides: the CPU
    cpu = {"prep", "cores"}
    agree = online_part in near or (online_part in cpu and bool(cpu & near))
    headroom = {k: v / predicted for k, v in present.items()}
    others = ", ".join(
        f"{k} {headroom[k]:.1f}x" for k in sorted(present, key=present.__getitem__) if k != binding
    )
    statement = (
        f"differential: {binding}-bound (ceilings: "
        + ", ".join(f"{k} {v:,.0f}/s" for k, v in sorted(present.items(), key=lambda kv: kv[1]))
        + f"); headroom of the others: {others or 'none measured'}. "
    )
    if agree:
        statement += f"The per-stage timers agree ({online.bound}-bound)."
    else:
        statement += (
            f"The per-stage timers disagree: they say {online.bound}-bound. One of the two is wrong for "
            "this cell; rerun with repeats, and check for contention the timers cannot see "
            "(a shared CPU, a noisy neighbour, server-side caching)."
        )
    error = predicted / measured_samples_per_s - 1.0 if measured_samples_per_s > 0 else math.inf
    return Attribution(
        binding=binding,
        ceilings=present,
        headroom=headroom,
        predicted_samples_per_s=predicted,
        measured_samples_per_s=measured_samples_per_s,
        prediction_error=error,
        online_bound=online.bound,
        agree=agree,
        au=au,
        statement=statement,
        capacity=capacity,
    )
