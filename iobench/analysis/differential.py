"""One attribution from two methods: the differential ceilings and the online per-stage timers.

The differential method names the binding part of the pipeline from rates measured in isolation
(iobench/cell/ceilings.py); the online method from the time each reader spends per sample in each
stage (verdict.py). They are independent measurements of the same question, so disagreement is
itself a finding and is reported, never hidden.

Where the time went: the accelerator is busy for AU of the wall time; the rest is lost to waiting
for data and to host-to-device copies (both measured per step). The wait is split over the stages
in proportion to the readers' per-sample stage times; the part of it the readers' own rate does
not explain (they could deliver R, the consumer received X < R) is booked as collate/IPC:
batches that were ready in a worker but not yet in the consumer's hands.
"""

from __future__ import annotations

import math

from iobench.results.figures import Attribution, Capacity, Verdict
from loaders.observe import STAGES

from .verdict import AU_TARGET

PARTS = ("accelerator", "prep", "fetch")
# what the online verdict's "bound" is called in the differential method
ONLINE_TO_PART = {"accelerator": "accelerator", "prep": "prep", "fetch": "fetch"}
AGREE_TOLERANCE = 0.15


def lost_time(
    *,
    wall_s: float,
    wait_s: float,
    h2d_s: float,
    stage_ms: dict[str, float],
    readers_rate: float | None,
    measured_rate: float,
) -> dict[str, float]:
    """Fractions of the wall time lost to each stage (see the module docstring)."""
    if wall_s <= 0:
        return dict.fromkeys([*STAGES, "h2d"], 0.0)
    wait = wait_s / wall_s
    unexplained = 0.0
    if readers_rate and readers_rate > measured_rate > 0:
        unexplained = 1.0 - measured_rate / readers_rate
    total_ms = sum(stage_ms.values())
    out = {}
    for stage in STAGES:
        share = stage_ms.get(stage, 0.0) / total_ms if total_ms > 0 else 0.0
        out[stage] = wait * (1.0 - unexplained) * share
    out["collate"] += wait * unexplained
    out["h2d"] = h2d_s / wall_s
    return out


def capacity(input_ceiling: float, per_accelerator: float, *, target: float = AU_TARGET) -> Capacity:
    """The largest accelerator count this input pipeline keeps at >= ``target`` AU (MLPerf
    Storage's rule): AU(n) = min(1, ceiling / (n x demand)), so n = floor(ceiling / (target x demand))."""
    n = math.floor(input_ceiling / (target * per_accelerator) + 1e-9)
    return Capacity(
        max_accelerators=n,
        input_ceiling_samples_per_s=input_ceiling,
        demand_per_accelerator=per_accelerator,
        predicted_au_at_max=min(1.0, input_ceiling / (n * per_accelerator)) if n else None,
        predicted_au_at_max_plus_one=min(1.0, input_ceiling / ((n + 1) * per_accelerator)),
    )


def combine(
    ceilings: dict[str, float],
    online: Verdict,
    *,
    measured_samples_per_s: float,
    au: float,
    wall_s: float,
    wait_s: float,
    h2d_s: float,
    stage_ms: dict[str, float],
) -> Attribution:
    present = {k: v for k, v in ceilings.items() if k in PARTS and v and v > 0}
    if not present:
        raise ValueError("no ceiling was measured")
    binding = min(present, key=present.__getitem__)
    predicted = present[binding]
    lost = lost_time(
        wall_s=wall_s,
        wait_s=wait_s,
        h2d_s=h2d_s,
        stage_ms=stage_ms,
        readers_rate=online.pipeline_capacity_samples_per_s,
        measured_rate=measured_samples_per_s,
    )
    online_part = ONLINE_TO_PART.get(online.bound, "unknown")
    # close ceilings cannot be told apart by either method: within the tolerance both names are right
    near = {k for k, v in present.items() if v <= predicted * (1 + AGREE_TOLERANCE)}
    agree = online_part in near
    headroom = {k: v / predicted for k, v in present.items()}
    others = ", ".join(f"{k} {headroom[k]:.1f}x" for k in sorted(present, key=present.get) if k != binding)
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
    error = measured_samples_per_s / predicted - 1.0
    return Attribution(
        binding=binding,
        ceilings=present,
        headroom=headroom,
        predicted_samples_per_s=predicted,
        measured_samples_per_s=measured_samples_per_s,
        prediction_error=error,
        online_bound=online.bound,
        agree=agree,
        lost_fraction=lost,
        au=au,
        statement=statement,
    )
