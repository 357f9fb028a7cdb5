"""The spread of a cell's compute per step: what synchronous training pays beyond the mean, since
every step waits for the slowest rank's compute (docs/method.md, *Compute jitter*).

An emulated accelerator's steps give the device times they drew (``compute_draw_s``), a real model's
its measured device time (``device_s``: CUDA events on a GPU, the step itself on CPU). Measured
steps only: warm-up steps are left out, as from every other figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from iobench.results.figures import StepRow, StepTimes


def step_times(rows: Sequence[StepRow], au_basis: str) -> StepTimes | None:
    """Mean, cv and percentiles of the measured steps' compute; None with fewer than two steps."""
    measured = [r for r in rows if not r.warmup]
    drawn = [r.compute_draw_s for r in measured if r.compute_draw_s is not None]
    if drawn:
        values, basis = drawn, "emulated draw"
    else:
        values = [r.device_s if r.device_s is not None else r.compute_s for r in measured]
        basis = au_basis
    if len(values) < 2:
        return None
    v = np.asarray(values, dtype=float)
    mean = float(v.mean())
    p50, p99 = np.percentile(v, [50, 99])
    return StepTimes(
        basis=basis,
        steps=len(v),
        mean_s=mean,
        cv=float(v.std(ddof=1) / mean) if mean > 0 else 0.0,
        p50_s=float(p50),
        p99_s=float(p99),
        max_s=float(v.max()),
    )
