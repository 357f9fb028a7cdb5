"""Summary of repeated runs of one cell: mean with a Student-t interval, and an instability flag.

Definitions are in docs/method.md. The t quantile is computed, not looked up (closed-form t CDF for
integer degrees of freedom, inverted by bisection), so any confidence level works without scipy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

ONE_RUN_NOTICE = "one run: no interval"


@dataclass(frozen=True)
class RepeatSummary:
    n: int
    mean: float
    median: float
    stdev: float | None  # sample stdev (n - 1); None for one run
    ci_low: float | None  # Student-t interval of the mean; None for one run
    ci_high: float | None
    confidence: float
    t_quantile: float | None  # t_{(1+confidence)/2, n-1}; None for one run
    spread: float  # (max - min) / |median|
    unstable_spread: float  # threshold the spread was judged against
    unstable: bool  # spread > unstable_spread: the runs disagree
    notice: str | None  # e.g. ONE_RUN_NOTICE

    def as_dict(self) -> dict:
        return asdict(self)


def t_cdf_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df >= 1 (Abramowitz & Stegun 26.7.3-26.7.4).

    The finite series in cos(theta), theta = atan(t / sqrt(df)), is exact for integer df; its
    terms fall monotonically, so the sum stops once they no longer change it.
    """
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if t <= 0.0:
        return 0.0
    if math.isinf(t):
        return 1.0
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    c2 = c * c
    if df % 2 == 0:
        # sin(theta) * [1 + 1/2 c^2 + (1*3)/(2*4) c^4 + ... up to c^(df-2)]
        term, total = 1.0, 1.0
        for j in range(1, df // 2):
            term *= (2 * j - 1) / (2 * j) * c2
            if total + term == total:
                break
            total += term
        return min(1.0, s * total)
    if df == 1:
        return 2.0 * theta / math.pi
    # (2/pi) * (theta + sin(theta) * c * [1 + 2/3 c^2 + (2*4)/(3*5) c^4 + ... up to c^(df-3)])
    term, total = 1.0, 1.0
    for j in range(1, (df - 1) // 2):
        term *= (2 * j) / (2 * j + 1) * c2
        if total + term == total:
            break
        total += term
    return min(1.0, 2.0 / math.pi * (theta + s * c * total))


# Above this many degrees of freedom the exact CDF series gets long (about df/2 terms per
# evaluation), while the Cornish-Fisher expansion's error, O(df^-5), is far below float precision.
_CORNISH_FISHER_DF = 1000


def _bisect(cdf: Callable[[float], float], confidence: float) -> float:
    lo, hi = 0.0, 1.0
    while cdf(hi) < confidence:
        lo, hi = hi, hi * 2.0
    # The CDF is monotone, and 200 halvings reach adjacent floats from any bracket the loop above
    # can produce, so the answer is as exact as the CDF itself.
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if cdf(mid) < confidence:
            lo = mid
        else:
            hi = mid
    return hi


def t_quantile(confidence: float, df: int) -> float:
    """The t with P(|T| <= t) = confidence, i.e. the (1 + confidence) / 2 quantile, df >= 1.

    df <= 1000: bisection on the exact t CDF. Beyond: the Cornish-Fisher expansion around the
    normal quantile (Abramowitz & Stegun 26.7.5), to the df^-4 term.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if df <= _CORNISH_FISHER_DF:
        return _bisect(lambda t: t_cdf_two_sided(t, df), confidence)
    z = _bisect(lambda x: math.erf(x / math.sqrt(2.0)), confidence)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def summarize(
    values: Sequence[float], *, confidence: float = 0.95, unstable_spread: float = 0.05
) -> RepeatSummary:
    """Mean, median, sample stdev, Student-t CI of the mean and spread of repeated runs.

    CI = mean ± t_{(1+confidence)/2, n-1} · stdev / sqrt(n). spread = (max - min) / |median|;
    unstable when spread > unstable_spread. One run: no stdev or interval, and a notice saying so.
    Raises ValueError on no values, a non-finite value or a confidence outside (0, 1).
    """
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values to summarise: need at least one run")
    bad = [v for v in xs if not math.isfinite(v)]
    if bad:
        raise ValueError(f"{len(bad)} of {len(xs)} values are NaN or infinite (first: {bad[0]!r})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if unstable_spread < 0.0:
        raise ValueError(f"unstable_spread must be >= 0, got {unstable_spread}")
    n = len(xs)
    # statistics.mean is correctly rounded, so identical runs give exactly their value back.
    mean = float(statistics.mean(xs))
    median = statistics.median(xs)
    width = max(xs) - min(xs)
    if width == 0.0:
        spread = 0.0
    elif median == 0.0:
        # Runs that straddle zero have no meaningful relative spread; call them unstable.
        spread = math.inf
    else:
        spread = width / abs(median)
    if n == 1:
        return RepeatSummary(
            n=1,
            mean=mean,
            median=median,
            stdev=None,
            ci_low=None,
            ci_high=None,
            confidence=confidence,
            t_quantile=None,
            spread=0.0,
            unstable_spread=unstable_spread,
            unstable=False,
            notice=ONE_RUN_NOTICE,
        )
    # statistics.stdev works in exact rational arithmetic, so identical runs give exactly 0.
    stdev = statistics.stdev(xs)
    t = t_quantile(confidence, n - 1)
    half = t * stdev / math.sqrt(n)
    return RepeatSummary(
        n=n,
        mean=mean,
        median=median,
        stdev=stdev,
        ci_low=mean - half,
        ci_high=mean + half,
        confidence=confidence,
        t_quantile=t,
        spread=spread,
        unstable_spread=unstable_spread,
        unstable=spread > unstable_spread,
        notice=None,
    )
