"""Synchronous AU at scale, predicted from one measured cell's steps.

In synchronous data-parallel training every step waits for the slowest of W ranks, so a tail that
costs one rank little costs W ranks a lot. From a cell's measured steps (one rank, or every rank of
a multi-rank cell, pooled) the prediction draws W rank streams of batch production times by a
circular block bootstrap (blocks of ``ceil(n^(1/3))`` consecutive steps, rounded up to whole
rounds of the loader's workers, so a stall that spans steps stays one stall and each batch keeps
its worker), replays them through each rank's loader queue into ranks that step together
(analysis/queue.py), each rank's step computing for the time the measured step that took that
batch computed (so a compute that jitters, an emulated accelerator's drawn device time or a real
model's spread, is paid at the slowest rank as the data is), and adds what every rank spends alike:
host-to-device, the loop's own overhead and the exposed all-reduce modelled for W ranks:

    step(W) = mean_k max_r (ready[r, k] + compute[r, k]) - asked[k]  + h2d + overhead + allreduce_exposed(W)
    AU(W) = device busy / step(W),  job samples/s = W x batch / step(W)

A batch's production time is what its worker took to make it (``ready_s - begun_s`` of
steps.parquet); the hand-over is the rest of the measured wait. Without workers (or a backend that
does not stamp its batches) the production time is the step's measured wait and there is no queue:
the step's data wait is then the slowest of W waits. Where a reader read bytes ahead of a batch
(one object per sample, reads in flight: ``read_asked_s``, ``read_in_s``), the batch is replayed two
ways (analysis/readahead.py): a maker that waits longer (for its peers) finds more of them in.

It assumes the ranks' production times are independent draws of the measured ones: each rank reads
its own share of a tier that is not slowed by the others (shared-tier contention across nodes is not
in the measurement), and a rank's workers have the CPU they had when measured. With more ranks than
measured steps the slowest of W draws cannot exceed the largest time measured: that point is
flagged, its wait a lower bound and its AU an upper bound. docs/scale-out.md says where it holds
and where it breaks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from iobench.analysis.ledger import device_busy, device_cap
from iobench.analysis.queue import NO_QUEUE, LoaderQueue, synchronous_waits
from iobench.analysis.readahead import two_ways
from iobench.analysis.resample import StreamDraw, epochs_of
from iobench.results.codec import to_json
from iobench.results.figures import ScalePoint, StepAlone, StepRow
from iobench.results.spec import CellSpec
from iobench.results.summary import CellSummary

WORLD_SIZES = (1, 2, 3, 4, 8, 64, 512, 4096)
# bootstrap draws per world size: replicates x world size x steps, at most this many batches
DRAW_BUDGET = 4_000_000
MIN_REPLICATES, MAX_REPLICATES = 8, 64
CHUNK = 1 << 20  # batches replayed at once (the arrays of one replay)
METHOD = (
    "circular block bootstrap of the measured batches' production times (blocks of ceil(n^(1/3)) "
    "steps, whole rounds of workers), W rank streams replayed through each rank's loader queue "
    "(workers x prefetch), with the bytes its reader read ahead of each batch, into ranks that step "
    "together, plus the measured h2d, compute and loop "
    "overhead and the exposed all-reduce modelled for W ranks"
)


def block_length(n: int) -> int:
    return max(1, math.ceil(n ** (1 / 3)))


def replayed(rows: Sequence[StepRow], queue: LoaderQueue) -> LoaderQueue:
    """The queue the model replays ``rows`` through: ``queue``, or none when a batch was not
    stamped with its production times (a backend that does not stamp: the model without a queue,
    pessimistic with workers)."""
    return NO_QUEUE if any(r.begun_s is None or r.ready_s is None for r in rows) else queue


def in_order(rows: Sequence[StepRow]) -> list[StepRow]:
    """``rows`` in (rank, step) order: each rank's batches as its loop took them."""
    return sorted(rows, key=lambda r: (r.rank, r.step))


def _previous_ready(ordered: Sequence[StepRow]) -> list[float | None]:
    """For each of ``ordered``'s batches, when its maker's previous one was ready (``ready_s``;
    None: its maker's first, or not stamped)."""
    last: dict[tuple[int, int], float] = {}  # (rank, maker): when its last batch was ready
    out: list[float | None] = []
    for r in ordered:
        out.append(last.get((r.rank, r.reader)))
        if r.ready_s is not None:
            last[(r.rank, r.reader)] = r.ready_s
    return out


@dataclass(frozen=True)
class Production:
    """The measured batches, in (rank, step) order, as the model replays them."""

    made: np.ndarray  # what making each took, from when its maker began it
    taking: np.ndarray  # the hand-over to the training loop
    compute: np.ndarray  # the compute of the step that took it
    # where a reader read ahead: each batch's making from when its maker's previous batch was ready
    # (-inf: nothing read ahead of it; analysis/readahead.py); None: nothing was
    ahead: np.ndarray | None = None


def _stamps(row: StepRow) -> tuple[float, float]:
    """When ``row``'s batch was begun and ready: stamped on every row a queue replays (:func:`replayed`)."""
    if row.begun_s is None or row.ready_s is None:
        raise TypeError(
            f"rank {row.rank} step {row.step}: no production stamps to replay a loader queue with"
        )
    return row.begun_s, row.ready_s


def production(rows: Sequence[StepRow], queue: LoaderQueue) -> Production:
    """Each of ``rows``' batches' production time and hand-over cost, and the compute of the step
    that took it, for a model with ``queue``; without workers the step's wait is its production
    time.

    With workers a batch's production time is what its worker took to make it, from when the model
    lets the worker start it (its previous batch done and the batch requested: when the loop took
    the batch ``depth`` before it) to ready, and never less than from ``begun_s``: so what delays a
    worker beyond that (waking up, starting an epoch's stream) is in the time the model replays.
    Where a reader read ahead of a batch (stamped reads), its making is replayed two ways
    (analysis/readahead.py): from when its maker began it with every byte read ahead in, plus that
    delay, and from when its maker's previous batch was ready."""
    ordered = in_order(rows)
    before = _previous_ready(ordered)
    waits = np.array([r.wait_s for r in ordered])
    compute = np.array([r.compute_s for r in ordered])
    if queue.workers == 0:
        made, taking = waits.copy(), np.zeros_like(waits)
    else:
        stamps = [_stamps(r) for r in ordered]
        made = np.array([ready - begun for begun, ready in stamps])
        taken = [r.t_start + r.wait_s for r in ordered]
        for i, r in enumerate(ordered):
            asked, previous = i - queue.depth, before[i]
            if previous is not None and asked >= 0 and ordered[asked].rank == r.rank:
                made[i] = max(made[i], stamps[i][1] - max(previous, taken[asked]))
        # a batch ready before the step asked for it still costs the hand-over (unpickling, the ring)
        late = np.maximum(
            0.0, np.array([ready - r.t_start for r, (_, ready) in zip(ordered, stamps, strict=True)])
        )
        made, taking = np.maximum(0.0, made), np.maximum(0.0, waits - late)
    ahead = np.full(len(ordered), -np.inf)
    for i, r in enumerate(ordered):
        previous, asked_s, in_s, begun, ready = before[i], r.read_asked_s, r.read_in_s, r.begun_s, r.ready_s
        if previous is None or asked_s is None or in_s is None or begun is None or ready is None:
            continue
        stamped = ready - begun
        own = max(0.0, stamped - (r.fetch_wait_s or 0.0))  # its making less its waits for bytes
        both = two_ways(asked_s, in_s, begun, previous, own)
        if both is not None:
            # what kept the maker from beginning when the model lets it stays in its making
            made[i], ahead[i] = both[0] + max(0.0, made[i] - stamped), both[1]
    return Production(made, taking, compute, ahead if np.isfinite(ahead).any() else None)


def predict(
    rows: Sequence[StepRow],
    exposed_allreduce: Callable[[int, float], float],
    *,
    queue: LoaderQueue = NO_QUEUE,
    world_sizes: Sequence[int] = WORLD_SIZES,
    seed: int = 0,
    alone: StepAlone | None = None,
) -> list[ScalePoint]:
    """The synchronous job at each of ``world_sizes`` from ``rows`` (the measured steps, warm-up
    left out), each rank's loader a ``queue``. ``exposed_allreduce(W, compute_s)`` is the modelled
    all-reduce a step waits for. AU is the device's busy time per step (as the cell's own AU:
    ``ledger.device_busy``, capped by the step ``alone``) over the step: a step stretched by its
    host (an emulated trainer's host work, a starved real one) is longer, not busier."""
    measured = [r for r in rows if not r.warmup]
    if len(measured) < 2:
        raise ValueError(f"{len(measured)} measured step(s): too few to predict a synchronous job at scale")
    queue = replayed(measured, queue)
    batches = production(measured, queue)
    ordered = in_order(measured)
    epochs = epochs_of([r.rank for r in ordered], [r.epoch for r in ordered])
    compute = float(batches.compute.mean())
    cap = device_cap(alone)
    busy = sum(device_busy(r, cap) for r in measured) / len(measured)
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
    n = len(batches.made)
    # blocks of whole rounds of the workers, starting at a round: each batch keeps its worker
    unit = max(1, queue.workers)
    length = unit * -(-block_length(n) // unit)
    draw = StreamDraw(n, block=length, unit=unit, epochs=epochs, segment=max(1, queue.depth))
    rng = np.random.default_rng(seed)
    out = []
    for world in world_sizes:
        replicates = int(np.clip(DRAW_BUDGET // (world * n), MIN_REPLICATES, MAX_REPLICATES))
        allreduce = exposed_allreduce(world, compute)
        rest = h2d + overhead + allreduce  # every rank alike; each rank's compute is drawn
        means, spans = np.empty(replicates), np.empty(replicates)
        chunk = max(1, CHUNK // (world * n))  # replicates replayed at once: bounded memory
        for first in range(0, replicates, chunk):
            count = min(chunk, replicates - first)
            index = draw((count, world), rng)
            ahead = batches.ahead[index] if batches.ahead is not None else None
            waits, span = synchronous_waits(
                batches.made[index], batches.taking[index], queue, rest, batches.compute[index], ahead
            )
            means[first : first + count] = waits.mean(axis=-1)
            spans[first : first + count] = span.mean(axis=-1)
        steps = spans + rest
        au = busy / steps
        step = float(steps.mean())
        out.append(
            ScalePoint(
                world_size=world,
                au=busy / step,
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
    predicted_low: float = 0.0  # the prediction's 95 % bootstrap interval
    predicted_high: float = 0.0

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
            out.append(
                ScaleCheck(
                    s.cell_id, d.world_size, s.metrics.au, point.au, twin.cell_id, point.au_low, point.au_high
                )
            )
    return out
