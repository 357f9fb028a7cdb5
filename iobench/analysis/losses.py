"""Samples lost: what a cell's completed epochs did not deliver against their plans, where, and the
one line that says it first in the headline (the judge composes it there, analysis/verdict.py) and
in the bottom line (docs/method.md, Samples lost).

Each epoch's plan is the loader's own count of what it delivers to the cell's ranks (the dataset
manifest's counts through the even split, loaders/epochtally.py), recorded with the epoch; an epoch
that the run stopped early (run.max_steps) is not judged. The regions readers skipped and the
samples skipped as corrupt say where the loss is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from iobench.results.figures import EpochFigures, LoaderStats, SampleLoss
from loaders.observe import Loss


def sample_loss(epochs: Sequence[EpochFigures], completed: int, stats: LoaderStats) -> SampleLoss | None:
    """The loss over the first ``completed`` epochs, from their counts and the loader's ``stats``
    (the whole run's); None when every completed epoch with a known plan delivered all of it."""
    judged = [
        (e, expected) for e in epochs if e.epoch < completed and (expected := e.expected_samples) is not None
    ]
    short = [(e, expected) for e, expected in judged if e.samples < expected]
    if not short:
        return None
    worst, worst_expected = max(short, key=lambda pair: pair[1] - pair[0].samples)
    return SampleLoss(
        lost=sum(expected - e.samples for e, expected in short),
        expected=sum(expected for _, expected in judged),
        epoch=worst.epoch,
        epoch_delivered=worst.samples,
        epoch_expected=worst_expected,
        where=tuple({(r.url, r.begin, r.end): r for r in stats.losses}.values()),  # each region once
        skipped=dict(stats.errors),
        cache_damaged=stats.counters.cache.damaged if stats.counters.cache else 0,
    )


def loss_line(loss: SampleLoss) -> str:
    """The finding in one line: the worst epoch's count, where its samples went."""
    lost = loss.epoch_expected - loss.epoch_delivered
    text = (
        f"SAMPLES LOST: epoch {loss.epoch} delivered {loss.epoch_delivered:,} of {loss.epoch_expected:,} "
        f"samples ({lost:,} lost; {loss.lost:,} of {loss.expected:,} over the completed epochs)"
    )
    where = [Loss(**asdict(r)).describe() for r in loss.where[:2]]
    if loss.skipped:
        where.append("skipped as corrupt: " + ", ".join(f"{n:,} {kind}" for kind, n in loss.skipped.items()))
    if where:
        text += ": " + "; ".join(where)
    return text
