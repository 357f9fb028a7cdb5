"""The step loop's side of keeping ranks in step (cell/steps/steploop.py with cell/ranks/sync.py): when one
rank's loader runs out first, every rank ends the epoch at that step, and the batches the others
already had are dropped and counted, never waited on."""

from __future__ import annotations

import time

from iobench.cell.steps.steploop import run_steps
from loaders import Batch, StageStats


class _Consumer:
    demand_samples_per_s = None
    last_device_s = 0.0
    last_draw_s = None

    def h2d(self, images, labels):
        return images, labels, 0.0

    def step(self, x, y) -> float:
        return 0.0


class _PeersRunOutAt:
    """A StepSync stand-in: the peers have batches for ``steps`` steps of each epoch."""

    def __init__(self, steps: int) -> None:
        self.steps, self.seen = steps, 0
        self.flags: list[bool] = []

    def agree(self, have_batch: bool) -> tuple[float, bool]:
        self.flags.append(have_batch)
        everyone = have_batch and self.seen < self.steps
        self.seen = self.seen + 1 if everyone else 0  # a new epoch starts after a disagreement
        return 0.0, everyone

    def allreduce(self, compute_s: float) -> float:
        return 0.0


def _epoch(n: int):
    return lambda epoch: (
        Batch(images=[0] * 4, labels=[0] * 4, keys=[""] * 4, stats=StageStats()) for _ in range(n)
    )


def test_a_peer_that_runs_out_first_ends_the_epoch_for_everyone():
    sync = _PeersRunOutAt(steps=3)
    log = run_steps(_epoch(5), _Consumer(), created_at=time.perf_counter(), epochs=2, sync=sync)  # type: ignore[arg-type]
    # this rank had 5 batches an epoch, its peers 3: 3 steps per epoch, the 4th batch dropped, the
    # 5th never asked for (the epoch ended), and no collective entered that the peers did not
    assert [(r.epoch, r.step) for r in log.rows] == [(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5)]
    assert log.dropped_batches == 2 and log.epochs_completed == 2
    assert sync.flags == [True, True, True, True] * 2


def test_the_step_alone_is_timed_on_a_full_batch_not_the_epochs_short_last_one():
    def epoch(e: int):
        sizes = (4, 4, 1)  # the epoch's remainder comes last
        return (Batch(images=[0] * n, labels=[n] * n, keys=[""] * n, stats=StageStats()) for n in sizes)

    log = run_steps(epoch, _Consumer(), created_at=time.perf_counter(), epochs=1)  # type: ignore[arg-type]
    assert log.last_input is not None and len(log.last_input[1]) == 4
