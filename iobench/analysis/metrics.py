"""Pipeline metrics from the step rows. Each definition here is documented in docs/method.md."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from iobench.results.figures import PipelineMetrics, StepAlone, StepRow


def device_busy(rows: Sequence[StepRow], alone: StepAlone | None) -> float:
    """The device's busy time over ``rows``. A CUDA span counts the device's idle gaps while a slow
    host launches the step's kernels, so it is capped at the span of the same step alone (the
    device's work per step does not depend on the host)."""
    cap = alone.device_s if alone is not None and alone.device_s is not None else float("inf")
    return float(sum(min(r.compute_s if r.device_s is None else r.device_s, cap) for r in rows))


def compute_metrics(
    rows: Sequence[StepRow],
    time_to_first_batch_s: float | None = None,
    *,
    alone: StepAlone | None = None,
    au_basis: str | None = None,
    loader_cpu_s: float | None = None,
) -> PipelineMetrics:
    """The metrics of docs/method.md over the measured rows. ``alone`` is the step timed alone (the
    trainer's slowdown is the median step in the cell over it), ``au_basis`` names the device time
    AU divides (docs/method.md), ``loader_cpu_s`` the CPU its readers used over the measured steps."""
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
    busy = device_busy(measured, alone)
    cpu = [r.trainer_cpu_s for r in measured if r.trainer_cpu_s is not None]
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
        au=busy / wall if wall > 0 else 0.0,
        au_mlperf=au_mlperf,
        stall_fraction=float(waits.sum()) / wall if wall > 0 else 0.0,
        wait_p50_ms=float(pct[0]),
        wait_p95_ms=float(pct[1]),
        wait_p99_ms=float(pct[2]),
        wait_max_ms=float(waits.max() * 1000.0),
        time_to_first_batch_s=time_to_first_batch_s,
        epoch_boundary_wait_ms=epoch_boundary_wait_ms(rows),
        device_busy_s=busy,
        au_basis=au_basis,
        step_alone_s=alone.step_s if alone else None,
        trainer_slowdown=float(np.median([r.compute_s for r in measured])) / alone.step_s
        if alone and alone.step_s > 0
        else None,
        trainer_cpu_ms_per_step=1000.0 * float(np.mean(cpu)) if cpu else None,
        loader_cores=loader_cpu_s / wall if loader_cpu_s is not None and wall > 0 else None,
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
