"""How long a cell measures: long enough for its figures to mean something.

A window of a dozen steps and half a second says more about worker start-up and one epoch boundary
than about the pipeline: a cold and a warm cell of the same data then differed by 75 % here.
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

from iobench.analysis.ledger import totals
from iobench.analysis.repeats import summarize
from iobench.analysis.steady import steady_state
from iobench.results.figures import SteadyState, StepAccount, StepRow, Window
from iobench.results.spec import MinMeasure

MAX_EPOCHS = 50
BATCHES = 10


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


# under ``need: either``, the least a window has, however its limits are set: MSER needs a series to
# read, and a few seconds say more than a handful of fast steps
EITHER_LEAST_STEPS = 10
EITHER_LEAST_SECONDS = 5.0


def met(minimum: MinMeasure, steps: int, seconds: float) -> bool:
    """The one window rule: whether ``steps`` over ``seconds`` after the warm-up are enough. ``both``:
    the steps and the seconds; ``either``: the steps over a few seconds, or the seconds over a few
    steps."""
    if minimum.need == "both":
        return steps >= minimum.steps and seconds >= minimum.seconds
    return (steps >= minimum.steps and seconds >= min(EITHER_LEAST_SECONDS, minimum.seconds)) or (
        seconds >= minimum.seconds and steps >= min(EITHER_LEAST_STEPS, minimum.steps)
    )


def short_of(minimum: MinMeasure, steps: int, seconds: float) -> bool:
    return not met(minimum, steps, seconds)


def rel_ci(entries: Sequence[StepAccount], figure: str = "samples_per_s") -> float | None:
    """Half-width of the 95 % interval of ``figure`` ("samples_per_s" or "au") over its mean, by
    batch means over one rank's measured steps' accounts; None with fewer than two steps per batch."""
    per = len(entries) // BATCHES
    if per < 2:
        return None
    values = []
    for i in range(BATCHES):
        t = totals(entries[i * per : (i + 1) * per])
        values.append((t.samples / t.span_s if figure == "samples_per_s" else t.au) if t.span_s > 0 else 0.0)
    s = summarize(values)
    if s.ci_low is None or s.ci_high is None or s.mean <= 0:
        return None
    return (s.ci_high - s.ci_low) / 2 / s.mean


def window_of(
    entries: Sequence[StepAccount],
    minimum: MinMeasure,
    *,
    epochs: int,
    requested: int,
    capped: str | None,
    device_read_share: float | None = None,
) -> Window:
    """The measured window of a finished repeat of one rank (warm-up already marked on its steps'
    ``entries``)."""
    measured = [e for e in entries if not e.warmup]
    seconds = totals(measured).span_s
    met = not short_of(minimum, len(measured), seconds)
    return Window(
        steps=len(measured),
        seconds=seconds,
        epochs=epochs,
        added_epochs=max(0, epochs - requested),
        samples_per_s_rel_ci=rel_ci(measured),
        met=met,
        short_because=None if met else capped,
        au_rel_ci=rel_ci(measured, "au"),
        device_read_share=device_read_share,
    )


def weakest(windows: Sequence[Window]) -> Window:
    """A multi-rank job's window: its ranks' shortest and least tight, met only if every rank's is."""
    short = next((w for w in windows if not w.met), None)
    cis = [w.samples_per_s_rel_ci for w in windows if w.samples_per_s_rel_ci is not None]
    aus = [w.au_rel_ci for w in windows if w.au_rel_ci is not None]
    return Window(
        steps=min(w.steps for w in windows),
        seconds=min(w.seconds for w in windows),
        epochs=max(w.epochs for w in windows),
        added_epochs=max(w.added_epochs for w in windows),
        samples_per_s_rel_ci=max(cis) if len(cis) == len(windows) else None,
        met=short is None,
        short_because=short.short_because if short else None,
        au_rel_ci=max(aus) if len(aus) == len(windows) else None,
        device_read_share=min(
            (w.device_read_share for w in windows if w.device_read_share is not None), default=None
        ),
    )
