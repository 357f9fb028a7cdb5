"""Rank streams drawn from one cell's measured batches, with the job's epochs in them.

A synchronous job over a fixed dataset split across W ranks has an epoch every
``steps per epoch at one rank / W`` steps, and every rank reaches it at the same step: the first
batches of an epoch (the workers start a new stream; analysis/scale.py's production times carry
what that cost) come W times as often per step at W ranks as at one, and the job waits for the
slowest of W of them at once. So each drawn stream takes, at every epoch start of the job, one of
the measured epoch starts (its first ``segment`` batches, whole), and between them batches of the
measured steady state by a circular block bootstrap (blocks of ``block`` batches starting at a
multiple of ``unit``, so a stall that spans steps stays one stall and each batch keeps its worker).
The job's epochs start at a phase drawn per replicate. A measurement without a later epoch's start
has none to draw: its streams are the block bootstrap alone, as measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Epochs:
    """Where the measured batches' epochs start, and how long an epoch is at one rank."""

    starts: tuple[int, ...]  # indices (into the measured batches) of a later epoch's first batch
    steps_at_one: float  # steps of one epoch for a job of one rank (a rank's steps x the ranks)

    def length(self, world: int) -> int:
        """Steps between epoch starts for a job of ``world`` ranks (at least 1)."""
        return max(1, round(self.steps_at_one / world))


def epochs_of(ranks: Sequence[int], epochs: Sequence[int]) -> Epochs | None:
    """The epochs of batches in (rank, step) order: ``ranks[i]``, ``epochs[i]``. None: no epoch
    measured whole (its length unknown) or none started within the measurement."""
    counts: dict[tuple[int, int], int] = {}
    for r, e in zip(ranks, epochs, strict=True):
        counts[(r, e)] = counts.get((r, e), 0) + 1
    starts = tuple(i for i in range(1, len(ranks)) if ranks[i] == ranks[i - 1] and epochs[i] != epochs[i - 1])
    if not starts:
        return None
    # an even split: every rank's whole epochs have the same steps; the first may be cut by warm-up
    steps = max(counts.values())
    return Epochs(starts=starts, steps_at_one=steps * len(set(ranks)))


class StreamDraw:
    """Draws rank streams of ``n`` indices into the ``n`` measured batches: blocks of ``block``
    batches starting at a multiple of ``unit`` from the steady state, and at the job's epoch starts
    the measured epoch starts' first ``segment`` batches (none without ``epochs``)."""

    def __init__(
        self, n: int, *, block: int, unit: int, epochs: Epochs | None = None, segment: int = 1
    ) -> None:
        self.n, self.block, self.unit, self.epochs = n, block, unit, epochs
        self.segment = segment
        self.segments = [s for s in (epochs.starts if epochs else ()) if s + segment <= n]
        at_start = {i for s in self.segments for i in range(s, s + segment)}
        # every batch an epoch's start (a few steps per epoch): the bootstrap draws from all of them
        self.steady = (
            np.array([i for i in range(n) if i not in at_start]) if len(at_start) < n else np.arange(n)
        )

    def __call__(self, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
        """``shape = (replicates, world)`` streams."""
        count, world = shape
        n, m = self.n, len(self.steady)
        blocks = -(-n // self.block)
        starts = rng.integers(0, max(1, m // self.unit), size=(count, world, blocks)) * self.unit
        drawn = self.steady[
            ((starts[..., None] + np.arange(self.block)) % m).reshape(count, world, -1)[..., :n]
        ]
        epochs = self.epochs
        if epochs is None or not self.segments:  # segments come only with epochs
            return drawn
        length = epochs.length(world)
        phase = rng.integers(0, length, size=(count, 1, 1))
        k = np.arange(n)
        offset = (k + phase) % length  # steps since the job's last epoch start
        boundary = offset < self.segment
        occurrence = (k + phase) // length
        chosen = rng.integers(0, len(self.segments), size=(count, world, int(occurrence.max()) + 1))
        first = np.asarray(self.segments)[
            np.take_along_axis(chosen, np.broadcast_to(occurrence, (count, world, n)), -1)
        ]
        # the steady batches fill the steps between epoch starts in the order drawn
        filled = np.cumsum(~boundary, axis=-1) - 1
        steady_at = np.take_along_axis(drawn, np.broadcast_to(np.maximum(filled, 0), (count, world, n)), -1)
        return np.where(boundary, first + offset, steady_at)
