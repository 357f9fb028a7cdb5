"""Warm-up length detected from the step-duration series by the MSER rule (docs/method.md).

A fixed warm-up count guesses how long worker start-up, the first shard opens and the cache fill
last; that depends on the loader, the worker count and the tier, so the count is either too short
(warm-up leaks into the measurement) or wastes steps. MSER reads the answer off the series itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from iobench.results.figures import SteadyState

# "steps": White's (1997) MSER statistic on the step durations themselves, searched every `batch`
# steps. "batch_means": the statistic on means of `batch` steps (MSER-5 of White, Cobb & Spratt
# 2000). On the series a loader produces, the batch-means form over-truncates a stationary tail
# far more often (see docs/method.md), because averaging throws away the within-batch variance
# that steadies the statistic; so "steps" is the default.
Statistic = Literal["steps", "batch_means"]

# Relative slack when picking the minimum: statistics equal up to rounding must resolve to the
# smallest truncation, or a flat series could discard steps over a last-bit difference.
_TIE_RTOL = 1e-9
_MIN_TAIL_VALUES = 10


def _validated(durations: Sequence[float]) -> np.ndarray:
    x = np.asarray(durations, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"durations must be a flat sequence of seconds, got shape {x.shape}")
    bad = ~np.isfinite(x) | (x < 0)
    if bad.all() and x.size:
        raise ValueError(
            f"all {x.size} step durations are NaN, infinite or negative: no usable series "
            "(durations are t_end - t_start of consecutive step rows, in seconds)"
        )
    if bad.any():
        # Dropping bad steps would shift every index after them and so the warm-up count itself;
        # a negative or NaN duration means the clock or the row pairing is wrong, so stop here.
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{int(bad.sum())} of {x.size} step durations are NaN, infinite or negative "
            f"(first at step {first}: {x[first]!r}); durations must be finite and >= 0 seconds"
        )
    return x


def _tail_mser(v: np.ndarray) -> np.ndarray:
    """MSER statistic SS(v[j:]) / len(v[j:])^2 for every j.

    Welford's update run from the end keeps the tail sums of squares accurate when the tail is
    nearly constant, where the textbook sum-of-squares difference cancels catastrophically.
    """
    out = np.empty(v.size)
    mean = 0.0
    m2 = 0.0
    for j in range(v.size - 1, -1, -1):
        count = v.size - j
        delta = v[j] - mean
        mean += delta / count
        m2 += delta * (v[j] - mean)
        out[j] = m2 / (count * count)
    return out


def _method_name(batch: int, statistic: Statistic) -> str:
    if statistic == "batch_means":
        return f"MSER-{batch}"
    return "MSER" if batch == 1 else f"MSER, {batch}-step grid"


def _detect(
    x: np.ndarray, batch: int, max_fraction: float, min_steps: int, statistic: Statistic
) -> tuple[int, int, bool, str | None]:
    """(warm-up steps, search limit in steps, at_limit, notice) for a validated series."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if not 0.0 < max_fraction <= 1.0:
        raise ValueError(f"max_fraction must be in (0, 1], got {max_fraction}")
    if statistic not in ("steps", "batch_means"):
        raise ValueError(f"statistic must be 'steps' or 'batch_means', got {statistic!r}")
    n = x.size
    need = max(min_steps, 2 * batch)
    if n < need:
        return 0, 0, False, f"{n} steps: too few to detect warm-up (need >= {need}); none discarded"
    if np.ptp(x) == 0.0:
        return 0, 0, False, None
    k = n // batch
    d_max = min(math.floor(max_fraction * k), k - 2)
    if d_max <= 0:
        return 0, 0, False, None
    # A tail of a few values has next to no variance and "wins" by chance (MSER's end effect), so
    # the look past the window stops while at least ten values of the statistic remain.
    per_value = batch if statistic == "batch_means" else 1
    last = max(d_max, k - max(2, -(-_MIN_TAIL_VALUES * per_value // batch)))
    if statistic == "batch_means":
        # Canonical MSER-5: the statistic on batch means. The trailing n mod batch steps do not
        # fill a batch and are left out of it (they still count as steady steps).
        z = x[: k * batch].reshape(k, batch).mean(axis=1)
        stats = _tail_mser(z)[: last + 1]
    else:
        stats = _tail_mser(x)[: last * batch + 1 : batch]
    # The minimum is also sought past the window: if it lies there, warm-up outlasts what the run
    # can afford to discard, and the minimum inside the window can sit anywhere, even at 0 (a mix of
    # slow and fast steps can have less variance than the window's tail). Discarding the whole
    # window and saying so is then the honest answer.
    best = float(stats.min())
    d = int(np.flatnonzero(stats <= best + _TIE_RTOL * abs(best))[0])
    limit = d_max * batch
    at_limit = d >= d_max
    notice = None
    if at_limit:
        notice = (
            f"warm-up may outlast the series: MSER's minimum is at step {d * batch} of {n}, at or "
            f"past the {limit}-step limit ({max_fraction:.0%}); discarded {limit}; run more steps"
        )
        d = d_max
    return d * batch, limit, at_limit, notice


def steady_state(
    durations: Sequence[float],
    *,
    batch: int = 5,
    max_fraction: float = 0.5,
    min_steps: int = 10,
    statistic: Statistic = "steps",
    start_up: int = 0,
) -> SteadyState:
    """The leading steps to discard as warm-up, by the MSER truncation rule (White 1997), and the
    figures a report needs of the steady steps after them.

    `durations` are per-step times in seconds (t_end - t_start of consecutive step rows). Over
    truncation points d = 0, batch, 2*batch, ... up to `max_fraction` of the series (and leaving at
    least two batches), the rule picks the d minimising

        sum_{i >= d} (x_i - mean(x[d:]))^2 / (n - d)^2

    (the smallest d on a tie), so the warm-up is a multiple of `batch`. With
    statistic="batch_means" the same statistic runs on means of `batch` steps: canonical MSER-5.
    No warm-up for a series shorter than max(min_steps, 2 * batch) or a constant one.

    The first ``start_up`` steps are warm-up whatever the series says (a loader's first step
    carries its start-up, which a job pays once); MSER reads the rest. Raises ValueError on an empty
    series or if any duration is NaN, infinite or negative."""
    x = _validated(durations)
    if x.size == 0:
        raise ValueError("no step durations: nothing to measure")
    head = min(start_up, x.size - 1)
    warm, limit, at_limit, notice = _detect(x[head:], batch, max_fraction, min_steps, statistic)
    warm, limit = warm + head, limit + head
    kept = x[warm:]
    return SteadyState(
        warmup_steps=warm,
        method=_method_name(batch, statistic) + (f" after {head} start-up step(s)" if head else ""),
        n_steps=int(x.size),
        steady_steps=int(kept.size),
        steady_mean_s=float(kept.mean()),
        steady_stdev_s=float(kept.std(ddof=1)) if kept.size >= 2 else None,
        warmup_mean_s=float(x[:warm].mean()) if warm else None,
        search_limit_steps=limit,
        at_limit=at_limit,
        notice=notice,
    )
