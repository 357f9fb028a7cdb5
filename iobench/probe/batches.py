"""Which batch a worker made each step took, so a step carries its batch's making (who made it, when
it began and was ready, its time per stage, its reads), as a sweep's steps do.

Without workers the batch is made inside the step's own next(). With workers, a DataLoader over a
map-style dataset hands out an epoch's batches in order, round-robin over its workers (batch k of
the epoch to worker k mod W, each worker making its batches in the order asked), so the k-th batch of
an epoch is the (k div W)-th its worker made in that epoch. A batch whose sample count does not match
is left unmatched, and so is every batch of an IterableDataset (whose workers can run out unevenly):
the analysis then splits its wait by the readers' shares over the window.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from .steps import Step


def match(
    steps: list[Step], fetches: list[Any], epoch_starts: list[float], workers: int, iterable: bool
) -> list[Any]:
    """For each step, the fetch record of its batch, or None."""
    if workers == 0:
        return _in_step(steps, fetches)
    if iterable or not epoch_starts:
        return [None] * len(steps)
    starts = sorted(epoch_starts)
    made: dict[tuple[int, int], list[Any]] = defaultdict(list)  # (epoch, worker) -> fetches in order
    for f in sorted(fetches, key=lambda f: f.t0):
        epoch = bisect.bisect_right(starts, f.t0) - 1
        if epoch >= 0:
            made[(epoch, f.worker)].append(f)
    out = []
    position: dict[int, int] = defaultdict(int)  # epoch -> batches taken so far
    for step in steps:
        epoch = bisect.bisect_right(starts, step.t_return) - 1
        k = position[epoch]
        position[epoch] += 1
        mine = made.get((epoch, k % workers), [])
        f = mine[k // workers] if k // workers < len(mine) else None
        out.append(f if f is not None and int(f.samples) == step.samples else None)
    return out


def _in_step(steps: list[Step], fetches: list[Any]) -> list[Any]:
    ordered = sorted(fetches, key=lambda f: f.t0)
    t0s = [f.t0 for f in ordered]
    out = []
    for step in steps:
        i = bisect.bisect_right(t0s, step.t_return) - 1
        f = ordered[i] if i >= 0 and ordered[i].t0 >= step.t_start else None
        out.append(f)
    return out
