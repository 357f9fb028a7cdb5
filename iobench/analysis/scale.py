"""Synchronous AU at scale, predicted from one measured cell's steps.

In synchronous data-parallel training every step waits for the slowest of W ranks, so a tail that
costs one rank little costs W ranks a lot: at W ranks a step's data wait is the *maximum* of W
waits. From a cell's measured steps (one rank, or every rank of a multi-rank cell, pooled) the
prediction draws W rank streams of waits by a circular block bootstrap (blocks of
``ceil(n^(1/3))`` consecutive steps, so a stall that spans steps stays one stall), takes the
maximum across the W streams at every step, and adds what every rank spends alike: host-to-device,
compute, the loop's own overhead and the exposed all-reduce modelled for W ranks:

    step(W) = mean_k max_r wait[r, k] + h2d + compute + overhead + allreduce_exposed(W)
    AU(W) = compute / step(W),  job samples/s = W x batch / step(W)

It assumes the ranks' waits are independent draws of the measured ones: each rank reads its own
share of a tier that is not slowed by the others (shared-tier contention across nodes is not in
the measurement), and a rank's loader does not get ahead while it waits for its peers (true with
``workers: 0``; prefetching workers absorb part of the tail, so the prediction is pessimistic
there). With more ranks than measured steps the slowest of W draws cannot exceed the largest wait
measured: that point is flagged, its wait a lower bound and its AU an upper bound.
docs/scale-out.md says where it holds and where it breaks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from iobench.results.codec import to_json
from iobench.results.figures import ScalePoint, StepRow
from iobench.results.spec import CellSpec
from iobench.results.summary import CellSummary

WORLD_SIZES = (1, 2, 3, 4, 8, 64, 512, 4096)
# bootstrap draws per world size: replicates x world size x steps, at most this many waits
DRAW_BUDGET = 4_000_000
MIN_REPLICATES, MAX_REPLICATES = 8, 64
METHOD = (
    "circular block bootstrap of the measured steps' data waits (blocks of ceil(n^(1/3)) steps), "
    "the slowest of W rank streams at every step, plus the measured h2d, compute and loop overhead "
    "and the exposed all-reduce modelled for W ranks"
)


def block_length(n: int) -> int:
    return max(1, math.ceil(n ** (1 / 3)))


def predict(
    rows: Sequence[StepRow],
    exposed_allreduce: Callable[[int, float], float],
    *,
    world_sizes: Sequence[int] = WORLD_SIZES,
    seed: int = 0,
) -> list[ScalePoint]:
    """The synchronous job at each of ``world_sizes`` from ``rows`` (the measured steps, warm-up
    left out). ``exposed_allreduce(W, compute_s)`` is the modelled all-reduce a step waits for."""
    measured = [r for r in rows if not r.warmup]
    if len(measured) < 2:
        raise ValueError(f"{len(measured)} measured step(s): too few to predict a synchronous job at scale")
    waits = np.array([r.wait_s for r in measured])
    compute = float(np.mean([r.compute_s for r in measured]))
    h2d = float(np.mean([r.h2d_s for r in measured]))
    batch = float(np.mean([r.samples for r in measured]))
    # what the loop itself takes between steps (timers, the live file): every rank pays it alike
    overhead = float(
        np.mean(
            [
                max(
                    0.0,
                    r.t_end - r.t_start - r.wait_s - r.peer_wait_s - r.h2d_s - r.compute_s - r.allreduce_s,
                )
                for r in measured
            ]
        )
    )
    n, length = len(waits), block_length(len(waits))
    rng = np.random.default_rng(seed)
    out = []
    for world in world_sizes:
        replicates = int(np.clip(DRAW_BUDGET // (world * n), MIN_REPLICATES, MAX_REPLICATES))
        blocks = -(-n // length)
        means = np.empty(replicates)
        for i in range(replicates):
            starts = rng.integers(0, n, size=(world, blocks))
            index = (starts[:, :, None] + np.arange(length)) % n  # (world, blocks, length), circular
            stream = waits[index.reshape(world, -1)[:, :n]]  # each rank's n steps of waits
            means[i] = stream.max(axis=0).mean()
        allreduce = exposed_allreduce(world, compute)
        steps = means + h2d + compute + overhead + allreduce
        au = compute / steps
        step = float(steps.mean())
        out.append(
            ScalePoint(
                world_size=world,
                au=compute / step,
                samples_per_s=world * batch / step,
                step_s=step,
                data_wait_s=float(means.mean()),
                allreduce_s=allreduce,
                au_low=float(np.percentile(au, 2.5)),
                au_high=float(np.percentile(au, 97.5)),
                beyond_measured_tail=world > n,
            )
        )
    return out


@dataclass(frozen=True)
class ScaleCheck:
    """A measured multi-rank synchronous cell beside the prediction its one-rank twin made for it."""

    cell_id: str
    world_size: int
    measured_au: float
    predicted_au: float
    predicted_from: str  # the one-rank cell whose steps made the prediction

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted_au / self.measured_au - 1.0 if self.measured_au else float("inf")


def _twin_key(cell: CellSpec) -> str:
    """What a cell is, but for its cell id and ranks: a multi-rank cell and its one-rank twin agree."""
    one = replace(cell, cell_id="", run=replace(cell.run, ranks_per_node=1, nodes=1))
    return json.dumps(to_json(one), sort_keys=True)


def checks(summaries: Sequence[CellSummary]) -> list[ScaleCheck]:
    """Every synchronous multi-rank cell that has a one-rank twin in ``summaries`` (the same cell
    but for the ranks), measured against the twin's prediction at its world size."""
    ones = {_twin_key(s.cell): s for s in summaries if s.ok and s.cell.run.world_size == 1}
    out = []
    for s in summaries:
        d = s.distributed
        if not s.ok or d is None or d.sync == "none" or s.metrics is None:
            continue
        twin = ones.get(_twin_key(s.cell))
        point = next((p for p in twin.scale if p.world_size == d.world_size), None) if twin else None
        if twin is not None and point is not None:
            out.append(ScaleCheck(s.cell_id, d.world_size, s.metrics.au, point.au, twin.cell_id))
    return out
