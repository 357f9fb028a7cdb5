"""The measured window: when a repeat has measured enough, how tight its samples/s is, and how a
short one extends itself by epochs (analysis/window.py, cell/steps/steploop.py)."""

from __future__ import annotations

import time

import pytest

from iobench.analysis import window
from iobench.analysis.ledger import ledger
from iobench.analysis.steady import steady_state
from iobench.cell.steps.steploop import run_steps, step_durations
from iobench.results.figures import StepRow, Window
from iobench.results.spec import MinMeasure
from loaders import Batch, StageStats


def _entries(durations: list[float], samples: int = 10, warm: int = 0):
    """The steps' accounts (analysis/ledger.py) of steps of these durations, all compute."""
    return ledger(_rows(durations, samples, warm))


def _rows(durations: list[float], samples: int = 10, warm: int = 0) -> list[StepRow]:
    rows, t = [], 0.0
    for i, d in enumerate(durations):
        rows.append(
            StepRow(
                step=i,
                epoch=0,
                warmup=i < warm,
                t_start=t,
                wait_s=0.0,
                h2d_s=0.0,
                compute_s=d,
                t_end=t + d,
                samples=samples,
                bytes_read=0,
            )
        )
        t += d
    return rows


def test_short_of_needs_both_the_seconds_and_the_steps():
    least = MinMeasure(seconds=5.0, steps=50)
    assert window.short_of(least, 49, 10.0) and window.short_of(least, 500, 4.9)
    assert not window.short_of(least, 50, 5.0)


def test_constant_steps_give_a_zero_interval_and_alternating_ones_a_known_one():
    assert window.rel_ci(_entries([0.1] * 40)) == pytest.approx(0.0, abs=1e-12)
    # batches of 4 steps: each batch's rate is 40 samples / 0.4 s, whatever the order inside it
    assert window.rel_ci(_entries([0.05, 0.15] * 20)) == pytest.approx(0.0, abs=1e-9)
    # half the batches at 100/s, half at 50/s: mean 75, sd of ten values 26.35, t(9) 2.262
    rows = _entries([0.1] * 20 + [0.2] * 20)
    expected = 2.2622 * (25 * (10 / 9) ** 0.5 / 10**0.5) / 75
    assert window.rel_ci(rows) == pytest.approx(expected, rel=1e-3)
    # every step all compute: AU 1 in every batch, no spread
    assert window.rel_ci(rows, "au") == pytest.approx(0.0, abs=1e-12)


def test_too_few_steps_for_ten_batches_have_no_interval():
    assert window.rel_ci(_entries([0.1] * 19)) is None


def test_the_window_of_a_repeat_counts_only_its_measured_steps():
    rows = _entries([1.0] + [0.1] * 60, warm=1)
    w = window.window_of(rows, MinMeasure(5.0, 50), epochs=3, requested=1, capped=None)
    assert (w.steps, w.epochs, w.added_epochs, w.met) == (60, 3, 2, True)
    assert w.seconds == pytest.approx(6.0)
    short = window.window_of(rows, MinMeasure(7.0, 50), epochs=1, requested=1, capped="run.max_steps")
    assert not short.met and short.short_because == "run.max_steps"


def test_a_job_window_is_its_weakest_rank():
    a = Window(steps=80, seconds=6.0, epochs=4, added_epochs=3, samples_per_s_rel_ci=0.02, met=True)
    b = Window(
        steps=40, seconds=5.5, epochs=4, added_epochs=3, samples_per_s_rel_ci=0.05, met=False,
        short_because="the 50-epoch limit",
    )  # fmt: skip
    w = window.weakest([a, b])
    assert (w.steps, w.seconds, w.samples_per_s_rel_ci, w.met, w.short_because) == (
        40, 5.5, 0.05, False, "the 50-epoch limit",
    )  # fmt: skip


def test_the_start_up_step_is_warm_up_on_its_own():
    durations = [0.3] + [0.1, 0.12] * 20
    # on its 5-step grid MSER would drop four steady steps with the start-up
    assert steady_state(durations).warmup_steps == 5
    s = window.warmup(durations)
    assert s.warmup_steps == 1 and "start-up" in s.method
    # and a first step no slower than the rest is still the loader's start-up: always left out
    assert window.warmup([0.1, 0.12] * 20).warmup_steps == 1


class _Clock:
    """A consumer whose step takes a fixed time: the window grows by known amounts."""

    demand_samples_per_s = None
    last_draw_s = None

    def __init__(self, step_s: float) -> None:
        self.step_s = self.last_device_s = step_s

    def h2d(self, images, labels):
        return images, labels, 0.0

    def step(self, x, y) -> float:
        time.sleep(self.step_s)
        return self.step_s


def _epoch(n: int):
    return lambda epoch: (
        Batch(images=[0] * 4, labels=[0] * 4, keys=[""] * 4, stats=StageStats()) for _ in range(n)
    )


def test_a_short_window_runs_more_epochs_until_it_is_long_enough():
    least = MinMeasure(seconds=0.0, steps=25)

    def more(log) -> bool:
        return window.short_of(least, *window.provisional(log.rows, step_durations(log), 0))

    log = run_steps(_epoch(6), _Clock(0.001), created_at=time.perf_counter(), more=more, max_epochs=50)
    assert len(log.epoch_stats) == 5 and len(log.rows) == 30  # 4 epochs give 24 steps: one more
    assert {r.epoch for r in log.rows} == set(range(5))


def test_the_epoch_limit_stops_a_window_that_never_fills():
    log = run_steps(
        _epoch(2), _Clock(0.0), created_at=time.perf_counter(), more=lambda log: True, max_epochs=4
    )
    assert len(log.epoch_stats) == 4 and len(log.rows) == 8


def test_requested_epochs_run_whatever_the_window_says():
    log = run_steps(_epoch(2), _Clock(0.0), created_at=time.perf_counter(), epochs=3, more=lambda log: False)
    assert len(log.epoch_stats) == 3
