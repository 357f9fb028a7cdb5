"""Pipeline metrics from the steps' accounts (analysis/ledger.py). Each definition here is
documented in docs/method.md."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypedDict

import numpy as np

from iobench.results.figures import PipelineMetrics, StepAccount, StepAlone

from .ledger import Totals


def pipeline_metrics(
    window: Sequence[StepAccount],
    totals: Totals,
    *,
    ranks: int = 1,
    every_step: Sequence[StepAccount] = (),
    time_to_first_batch_s: float | None = None,
    alone: Mapping[int, StepAlone] | None = None,
    au_basis: str | None = None,
    readers_in_process: bool = False,
    waits: Sequence[float] | None = None,
) -> PipelineMetrics:
    """The metrics of docs/method.md over the measured window: ``window``, its steps' accounts (every
    rank's, clipped to the common interval in a multi-rank cell) and ``totals``, their sum over
    ``ranks`` times the window's wall. ``every_step`` (warm-up included) gives DLIO's AU and the epoch
    boundaries' waits; ``alone`` each rank's step timed alone; ``readers_in_process``: the loader's readers
    ran in the trainer's process, whose CPU then holds theirs (counted once, as the loader's);
    ``waits``: the steps' whole waits, for their percentiles, where the window clipped some."""
    delivered = [e for e in window if e.delivered]
    if not delivered:
        raise ValueError("no measured steps: every step was warm-up; run more steps or fewer warm-up steps")
    wall = totals.span_s / ranks
    step_waits = np.array([e.wait for e in delivered] if waits is None else waits)
    pct = np.percentile(step_waits * 1000.0, [50, 95, 99])
    process_cpu = [e.trainer_cpu_s for e in window if e.trainer_cpu_s is not None]
    reader_cpu = float(sum(e.reader_cpu_s for e in window))
    trainer_cpu = float(sum(process_cpu)) - (reader_cpu if readers_in_process else 0.0)
    by_rank: dict[int, list[StepAccount]] = {}
    for e in every_step:
        by_rank.setdefault(e.rank, []).append(e)
    mlperf = [au for entries in by_rank.values() if (au := dlio_au(entries)) is not None]
    samples_per_step = float(np.median([e.samples for e in delivered]))
    alone = alone or {}
    in_cell = {
        rank: float(np.median([e.compute for e in delivered if e.rank == rank]))
        for rank in alone
        if any(e.rank == rank for e in delivered)
    }
    slowdowns = [in_cell[rank] / a.step_s for rank, a in alone.items() if a.step_s > 0 and rank in in_cell]
    # the median rank's step alone
    steps_alone = sorted(a.step_s for a in alone.values())
    step_alone = steps_alone[(len(steps_alone) - 1) // 2] if steps_alone else None
    # what the trainer can take: its median step alone (the host's quiet is recorded with it:
    # analysis/verdict.py judges nothing from a timing that met a busy host); where its median step
    # in the cell was faster still, the alone run met a busier host than the cell's steps did, and
    # the cell's steps are the evidence of what it can take
    takes = _trainer_takes(alone, in_cell, samples_per_step)
    return PipelineMetrics(
        steps=totals.steps,
        samples=totals.samples,
        wall_s=wall,
        samples_per_s=totals.samples / wall if wall > 0 else 0.0,
        bytes_read=totals.bytes_read,
        bytes_per_s=totals.bytes_read / wall if wall > 0 else 0.0,
        wait_s=totals.wait,
        h2d_s=totals["h2d"],
        compute_s=totals.compute,
        au=totals.au,
        au_mlperf=float(np.mean(mlperf)) if mlperf else None,
        stall_fraction=totals.wait / totals.span_s if totals.span_s > 0 else 0.0,
        wait_p50_ms=float(pct[0]),
        wait_p95_ms=float(pct[1]),
        wait_p99_ms=float(pct[2]),
        wait_max_ms=float(step_waits.max() * 1000.0),
        time_to_first_batch_s=time_to_first_batch_s,
        epoch_boundary_wait_ms=epoch_boundary_wait_ms(every_step),
        device_busy_s=totals["device"],
        au_basis=au_basis,
        step_alone_s=step_alone,
        trainer_slowdown=float(np.median(slowdowns)) if slowdowns else None,
        trainer_cpu_ms_per_step=1000.0 * trainer_cpu / len(process_cpu) if process_cpu else None,
        loader_cores=reader_cpu / wall if wall > 0 else None,
        trainer_cores=trainer_cpu / wall if process_cpu and wall > 0 else None,
        **takes,
    )


class _TrainerTakes(TypedDict, total=False):
    """PipelineMetrics' figures of the trainer alone: none where no step was timed alone."""

    trainer_alone_samples_per_s: float | None
    trainer_alone_low: float | None
    trainer_alone_high: float | None
    trainer_alone_quiet: bool | None
    trainer_alone_others_cores: float | None
    trainer_alone_slowed: float | None


def _trainer_takes(
    alone: Mapping[int, StepAlone], in_cell: Mapping[int, float], samples_per_step: float
) -> _TrainerTakes:
    """The trainer alone's rate (the median rank's), its 95 % interval, whether every rank's timing
    met a quiet host, the most cores other processes used while one was timed, and the most an
    emulated trainer's fixed work ran over its sized time."""
    if not alone:
        return {}
    step = {rank: min(a.step_s, in_cell.get(rank, math.inf)) for rank, a in alone.items()}
    median_rank = sorted(step, key=step.__getitem__)[(len(step) - 1) // 2]
    a, s = alone[median_rank], step[median_rank]
    low_s = min(a.step_low_s or s, s)
    high_s = max(a.step_high_s or s, s) if s == a.step_s else s
    quiets = [x.quiet for x in alone.values()]
    others = [x.others_cores for x in alone.values() if x.others_cores is not None]
    slowed = [x.slowed for x in alone.values() if x.slowed is not None]
    return {
        "trainer_alone_samples_per_s": samples_per_step / s if s > 0 else None,
        "trainer_alone_low": samples_per_step / high_s if high_s > 0 else None,
        "trainer_alone_high": samples_per_step / low_s if low_s > 0 else None,
        "trainer_alone_quiet": None if None in quiets else all(quiets),
        "trainer_alone_others_cores": max(others) if others else None,
        "trainer_alone_slowed": max(slowed) if slowed else None,
    }


def dlio_au(entries: Sequence[StepAccount]) -> float | None:
    """AU as DLIO (MLPerf Storage's engine) computes it over one rank's steps, on the device busy
    (where DLIO sleeps, the device time it sleeps): the device busy of steps 2..n over the time from
    the end of the first step to the end of the last, warm-up included. None with fewer than two
    steps."""
    if len(entries) < 2:
        return None
    ordered = sorted(entries, key=lambda e: e.end_s)
    wall = ordered[-1].end_s - ordered[0].end_s
    return float(sum(e.device for e in ordered[1:]) / wall) if wall > 0 else None


def epoch_dlio_au(entries: Sequence[StepAccount]) -> float | None:
    """One epoch's DLIO AU over ranks: each rank's, weighted by its steps (as DLIO weights blocks)."""
    by_rank: dict[int, list[StepAccount]] = {}
    for e in entries:
        by_rank.setdefault(e.rank, []).append(e)
    pairs = [(au, len(es)) for es in by_rank.values() if (au := dlio_au(es)) is not None]
    steps = sum(n for _, n in pairs)
    return sum(au * n for au, n in pairs) / steps if steps else None


def epoch_boundary_wait_ms(entries: Sequence[StepAccount]) -> float | None:
    """The mean wait of the first step of each epoch after the first (per rank, warm-up or not):
    what the loader's epoch boundary costs the training loop. None with one epoch."""
    firsts: dict[tuple[int, int], StepAccount] = {}
    for e in entries:
        key = (e.rank, e.epoch)
        if key not in firsts or e.step < firsts[key].step:
            firsts[key] = e
    if not firsts:
        return None
    first_epoch = min(epoch for _, epoch in firsts)
    later = [e.wait for (_, epoch), e in firsts.items() if epoch > first_epoch]
    return float(np.mean(later) * 1000.0) if later else None
