"""Pipeline metrics from the step rows. Each definition here is documented in docs/method.md."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from iobench.results.figures import PipelineMetrics, StepRow


def compute_metrics(rows: Sequence[StepRow], time_to_first_batch_s: float | None = None) -> PipelineMetrics:
    measured = [r for r in rows if not r.warmup]
    if not measured:
        raise ValueError(
            f"no measured steps: all {len(rows)} step(s) were warm-up; run more steps or fewer warm-up steps"
        )
    wall = measured[-1].t_end - measured[0].t_start
    waits = np.array([r.wait_s for r in measured])
    compute = float(sum(r.compute_s for r in measured))
    samples = int(sum(r.samples for r in measured))
    bytes_read = int(sum(r.bytes_read for r in measured))
    pct = np.percentile(waits * 1000.0, [50, 95, 99])
    au_mlperf = dlio_au(rows)
    return PipelineMetrics(
        steps=len(measured),
        samples=samples,
        wall_s=wall,
        samples_per_s=samples / wall if wall > 0 else 0.0,
        bytes_read=bytes_read,
        bytes_per_s=bytes_read / wall if wall > 0 else 0.0,
        wait_s=float(waits.sum()),
        h2d_s=float(sum(r.h2d_s for r in measured)),
        compute_s=compute,
        au=compute / wall if wall > 0 else 0.0,
        au_mlperf=au_mlperf,
        stall_fraction=float(waits.sum()) / wall if wall > 0 else 0.0,
        wait_p50_ms=float(pct[0]),
        wait_p95_ms=float(pct[1]),
        wait_p99_ms=float(pct[2]),
        wait_max_ms=float(waits.max() * 1000.0),
        time_to_first_batch_s=time_to_first_batch_s,
        epoch_boundary_wait_ms=epoch_boundary_wait_ms(rows),
    )


def dlio_au(rows: Sequence[StepRow]) -> float | None:
    """AU as DLIO (MLPerf Storage's engine) computes it over one rank's steps: the compute of steps
    2..n over the time from the end of the first step to the end of the last, warm-up included.
    None with fewer than two steps."""
    if len(rows) < 2:
        return None
    wall = rows[-1].t_end - rows[0].t_end
    return float(sum(r.compute_s for r in rows[1:]) / wall) if wall > 0 else None


def epoch_dlio_au(rows: Sequence[StepRow]) -> float | None:
    """One epoch's DLIO AU over ranks: each rank's, weighted by its steps (as DLIO weights blocks)."""
    by_rank: dict[int, list[StepRow]] = {}
    for r in rows:
        by_rank.setdefault(r.rank, []).append(r)
    pairs = [(au, len(rs)) for rs in by_rank.values() if (au := dlio_au(rs)) is not None]
    steps = sum(n for _, n in pairs)
    return sum(au * n for au, n in pairs) / steps if steps else None


def epoch_boundary_wait_ms(rows: Sequence[StepRow]) -> float | None:
    """The mean wait of the first step of each epoch after the first (per rank, warm-up or not):
    what the loader's epoch boundary costs the training loop. None with one epoch."""
    firsts: dict[tuple[int, int], StepRow] = {}
    for r in rows:
        key = (r.rank, r.epoch)
        if key not in firsts or r.step < firsts[key].step:
            firsts[key] = r
    if not firsts:
        return None
    first_epoch = min(epoch for _, epoch in firsts)
    later = [r.wait_s for (_, epoch), r in firsts.items() if epoch > first_epoch]
    return float(np.mean(later) * 1000.0) if later else None
