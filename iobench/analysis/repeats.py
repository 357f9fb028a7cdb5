"""Summary of repeated runs of one cell: mean with a Student-t interval, and an instability flag.

Definitions are in docs/method.md. The t quantile is computed, not looked up (closed-form t CDF for
integer degrees of freedom, inverted by bisection), so any confidence level works without scipy.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from iobench.results.figures import RepeatSummary

ONE_RUN_NOTICE = "one run: no interval"


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


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz's method)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    # the continued fraction converges fast for x < (a + 1) / (a + b + 2); use the symmetry beyond
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_sf_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with any real df > 0: I_{df / (df + t^2)}(df / 2, 1 / 2)."""
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df}")
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


@dataclass(frozen=True)
class WelchTest:
    """Welch's unequal-variances t-test of two means, B against A."""

    t: float  # (mean_b - mean_a) / standard error of the difference
    df: float  # Welch-Satterthwaite degrees of freedom
    p_value: float  # two-sided


def welch_test(a: RepeatSummary, b: RepeatSummary) -> WelchTest:
    """Welch's t-test from two repeat summaries (each needs n >= 2 and a stdev). Two samples with
    no spread at all are the same (p = 1) when their means are equal, else certainly different."""
    if a.n < 2 or b.n < 2 or a.stdev is None or b.stdev is None:
        raise ValueError(f"Welch's test needs two repeats or more on each side (got n={a.n} and n={b.n})")
    va, vb = a.stdev**2 / a.n, b.stdev**2 / b.n
    diff = b.mean - a.mean
    if va + vb == 0.0:
        return WelchTest(
            t=0.0 if diff == 0 else math.copysign(math.inf, diff), df=math.inf, p_value=float(diff == 0)
        )
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    return WelchTest(t=t, df=df, p_value=t_sf_two_sided(t, df))
