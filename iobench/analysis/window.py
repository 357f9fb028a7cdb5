"""How long a cell measures: long enough for its figures to mean something.

A window of a dozen steps and half a second says more about worker start-up and one epoch boundary
than about the pipeline: a cold and a warm cell of the same data then differ by 75 % (issue 20).
So every measured repeat has a minimum window after its warm-up (``run.min_measure``, default 5 s
and 50 steps). A repeat whose requested epochs give less runs more epochs over the data until the
window is reached; its epoch boundaries then recur inside the window, so the cost of each is part
of the steady state, in a cold cell as in a warm one, instead of a one-off that the warm-up
detection keeps or cuts by chance. ``run.max_steps`` is a hard stop (the window may stay short,
and the summary says so), and at most ``MAX_EPOCHS`` epochs run in all.

How tight the window's samples/s is: the measured steps in ``BATCHES`` contiguous batches (batch
means, so that correlated neighbouring steps do not shrink the interval), the Student-t interval
of their mean rate, its half-width over the mean.
"""

from __future__ import annotations

from collections.abc import Sequence

from iobench.analysis.repeats import summarize
from iobench.analysis.steady import steady_state
from iobench.results.figures import SteadyState, StepRow, Window
from iobench.results.spec import MinMeasure

MAX_EPOCHS = 50
BATCHES = 10


def _measured(rows: Sequence[StepRow]) -> list[StepRow]:
    return [r for r in rows if not r.warmup]


START_UP_STEPS = 1  # the loader's first step carries its start-up (workers, first opens): never steady


def warmup(durations: Sequence[float]) -> SteadyState:
    """The warm-up of an automatic (``warmup_steps: auto``) series: the start-up step, then MSER."""
    return steady_state(durations, start_up=START_UP_STEPS)


def provisional(rows: Sequence[StepRow], durations: Sequence[float], fixed: int | None) -> tuple[int, float]:
    """Steps and seconds measured so far after the warm-up (``fixed`` steps, or as the series
    suggests when None)."""
    if not rows:
        return 0, 0.0
    warm = fixed if fixed is not None else warmup(durations).warmup_steps
    kept = rows[min(warm, len(rows) - 1) :]
    return len(kept), kept[-1].t_end - kept[0].t_start


def short_of(minimum: MinMeasure, steps: int, seconds: float) -> bool:
    return steps < minimum.steps or seconds < minimum.seconds


def rel_ci(rows: Sequence[StepRow]) -> float | None:
    """Half-width of the 95 % interval of samples/s over its mean, by batch means; None with fewer
    than two steps per batch."""
    per = len(rows) // BATCHES
    if per < 2:
        return None
    rates = []
    for i in range(BATCHES):
        batch = rows[i * per : (i + 1) * per]
        span = batch[-1].t_end - batch[0].t_start
        rates.append(sum(r.samples for r in batch) / span if span > 0 else 0.0)
    s = summarize(rates)
    if s.ci_low is None or s.ci_high is None or s.mean <= 0:
        return None
    return (s.ci_high - s.ci_low) / 2 / s.mean


def window_of(
    rows: Sequence[StepRow], minimum: MinMeasure, *, epochs: int, requested: int, capped: str | None
) -> Window:
    """The measured window of a finished repeat (warm-up already marked on ``rows``)."""
    measured = _measured(rows)
    seconds = measured[-1].t_end - measured[0].t_start if measured else 0.0
    met = not short_of(minimum, len(measured), seconds)
    return Window(
        steps=len(measured),
        seconds=seconds,
        epochs=epochs,
        added_epochs=max(0, epochs - requested),
        samples_per_s_rel_ci=rel_ci(measured),
        met=met,
        short_because=None if met else capped,
    )


def weakest(windows: Sequence[Window]) -> Window:
    """A multi-rank job's window: its ranks' shortest and least tight, met only if every rank's is."""
    short = next((w for w in windows if not w.met), None)
    cis = [w.samples_per_s_rel_ci for w in windows]
    return Window(
        steps=min(w.steps for w in windows),
        seconds=min(w.seconds for w in windows),
        epochs=max(w.epochs for w in windows),
        added_epochs=max(w.added_epochs for w in windows),
        samples_per_s_rel_ci=None if None in cis else max(cis),  # type: ignore[type-var]
        met=short is None,
        short_because=short.short_because if short else None,
    )
