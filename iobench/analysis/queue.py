"""Batches replayed through a loader's bounded queue into ranks that step together.

A rank's loader has ``workers`` processes, each making every ``workers``-th batch in turn (PyTorch's
DataLoader: requests go round-robin, batches are taken in order), with at most ``prefetch x workers``
requests in flight: a request for batch ``k + depth`` goes out when the training loop takes batch
``k``. So a worker that is ahead stops once the queue is full, and one that hit a stall eats into
the batches queued before it. The ranks of a synchronous job ask for step ``k`` together, each takes
its own batch when it is ready, and step ``k + 1`` is asked for once the slowest rank has its batch
and the step's rest (host-to-device, compute, loop overhead, exposed all-reduce) has passed. With
``workers: 0`` the batch is made in the training process when asked for: the step's data wait is
the slowest rank's production time, the model without a queue.

A reader with reads in flight (one object per sample) reads ahead of its maker: the reads for a
batch's first samples are asked for while the maker finishes the batch before it and go on while
the maker waits to be asked for the next. Such a batch is ready no sooner than ``made`` after its
maker began it (its making with those bytes in) and no sooner than ``ahead`` after the maker's
previous batch was ready (its making paced by those bytes as measured): analysis/readahead.py.

docs/method.md, *Synchronous AU at scale*, has the definitions; docs/scale-out.md the assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LoaderQueue:
    """What bounds a rank's read-ahead: ``workers`` makers with ``prefetch`` requests each."""

    workers: int  # 0: the batch is made in the training process, when asked for
    prefetch: int

    @property
    def depth(self) -> int:
        """Batches requested ahead of the training loop (0: none)."""
        return self.workers * self.prefetch


NO_QUEUE = LoaderQueue(0, 0)


def synchronous_waits(
    made: np.ndarray,
    taking: np.ndarray,
    queue: LoaderQueue,
    rest: float,
    compute: np.ndarray | None = None,
    ahead: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Each step of a synchronous job: its data wait (from the step's request to the slowest rank
    having its batch) and its span (from the request to the slowest rank's end of compute).
    ``made[..., r, k]``: how long rank ``r``'s worker took to make batch ``k``; ``taking[..., r, k]``:
    what taking a ready batch cost the training loop (the hand-over from a worker; 0 without
    workers); ``compute[..., r, k]``: rank ``r``'s compute of step ``k`` (a compute that jitters: the
    job waits for the slowest; None: none here, all of it in ``rest``); ``rest``: what follows on
    every rank alike (host-to-device, the loop, the exposed all-reduce); ``ahead[..., r, k]``: where
    a reader read ahead of batch ``k``, its making from when its maker's previous batch was ready
    (-inf: nothing read ahead of it; ``made`` is then its making with those bytes in). Leading
    dimensions are independent jobs (bootstrap replicates). Returns two ``(..., steps)`` arrays."""
    jobs, steps = made.shape[:-1], made.shape[-1]
    if compute is None:
        compute = np.zeros_like(made)
    asked = np.zeros(jobs[:-1])  # when the ranks ask for the current step's batch
    waits = np.empty((*jobs[:-1], steps))
    spans = np.empty((*jobs[:-1], steps))
    makers = max(1, queue.workers)  # without workers the training process makes the batches
    free = np.zeros((*jobs, makers))  # when each maker was done with its last batch
    if queue.workers:
        taken = np.empty((*jobs, steps))  # when each rank took each batch
    for k in range(steps):
        w = k % makers
        if queue.workers:
            requested = taken[..., k - queue.depth] if k >= queue.depth else 0.0
            began = np.maximum(free[..., w], requested)
        else:
            began = np.broadcast_to(asked[..., None], jobs)
        ready = began + made[..., k]
        if ahead is not None:
            ready = np.maximum(ready, free[..., w] + ahead[..., k])
        free[..., w] = ready
        if queue.workers:
            got = np.maximum(asked[..., None], ready) + taking[..., k]
            taken[..., k] = got
        else:
            got = ready + taking[..., k]
        done = (got + compute[..., k]).max(axis=-1)
        waits[..., k] = got.max(axis=-1) - asked
        spans[..., k] = done - asked
        asked = done + rest
    return waits, spans
