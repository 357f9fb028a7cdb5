from __future__ import annotations

import math
import statistics
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.analysis.repeats import (
    ONE_RUN_NOTICE,
    betainc,
    summarize,
    t_cdf_two_sided,
    t_quantile,
    t_sf_two_sided,
    welch_test,
)
from iobench.analysis.steady import steady_state

# ---------------------------------------------------------------- series generators


def detect_warmup(durations, **rule) -> int:
    """The warm-up steps MSER finds in ``durations`` (what steady_state discards)."""
    return steady_state(durations, **rule).warmup_steps


def _slow_then_fast(seed: int, slow: int = 20, fast: int = 200) -> np.ndarray:
    r = np.random.default_rng(seed)
    return np.concatenate([0.5 + 0.05 * r.standard_normal(slow), 0.05 * (1 + 0.05 * r.standard_normal(fast))])


def _stationary(seed: int, n: int = 220) -> np.ndarray:
    r = np.random.default_rng(seed)
    return 0.05 * (1 + 0.05 * r.standard_normal(n))


def _first_step_spike(seed: int, n: int = 200) -> np.ndarray:
    x = _stationary(seed, n)
    x[0] = 2.0  # time to first batch: workers start, first shard opens
    return x


# ---------------------------------------------------------------- steady.py: known answers


def test_slow_then_fast_detects_the_slow_steps() -> None:
    assert 20 <= detect_warmup(_slow_then_fast(0)) <= 25


def test_slow_then_fast_over_many_seeds() -> None:
    # MSER is a statistic, not an oracle: on a few seeds the noise just after the shift makes a
    # later cut marginally better. Bound the rate rather than pick a friendly seed.
    got = np.array([detect_warmup(_slow_then_fast(s)) for s in range(200)])
    assert (got >= 20).all()  # never keeps a slow step
    assert ((got >= 20) & (got <= 25)).mean() >= 0.95
    assert got.max() <= 50


def test_stationary_series_truncates_little() -> None:
    x = _stationary(1)
    assert detect_warmup(x) <= 0.1 * x.size
    got = np.array([detect_warmup(_stationary(s)) for s in range(200)])
    assert (got <= 0.1 * 220).mean() >= 0.98
    assert np.median(got) == 0


def test_stationary_lognormal_truncates_little() -> None:
    got = []
    for s in range(200):
        r = np.random.default_rng(s)
        got.append(detect_warmup(r.lognormal(math.log(0.05), 0.3, 220)))
    assert (np.array(got) <= 22).mean() >= 0.95


def test_first_step_spike() -> None:
    assert 1 <= detect_warmup(_first_step_spike(2)) <= 5
    got = np.array([detect_warmup(_first_step_spike(s)) for s in range(200)])
    assert (got >= 1).all()  # the spike itself is always discarded
    assert ((got >= 1) & (got <= 5)).mean() >= 0.85


def test_batch_one_finds_the_exact_step() -> None:
    # A 1-step grid can cut exactly at the shift; after an isolated spike the noise may still move
    # the minimum a few steps on.
    assert detect_warmup(_slow_then_fast(0), batch=1) == 20
    assert 1 <= detect_warmup(_first_step_spike(2), batch=1) <= 5
    got = np.array([detect_warmup(_first_step_spike(s), batch=1) for s in range(200)])
    assert (got >= 1).all()
    assert (got == 1).mean() >= 0.3


def test_step_statistic_over_truncates_less_than_batch_means() -> None:
    # Why "steps" is the default: on the same stationary series, canonical MSER-5 on batch means
    # discards more steps, more often.
    steps = np.array([detect_warmup(_stationary(s)) for s in range(200)])
    means = np.array([detect_warmup(_stationary(s), statistic="batch_means") for s in range(200)])
    assert steps.mean() < means.mean()
    assert (steps > 22).sum() < (means > 22).sum()


def test_batch_means_finds_the_shift_too() -> None:
    assert 20 <= detect_warmup(_slow_then_fast(0), statistic="batch_means") <= 25


def test_result_is_a_multiple_of_batch() -> None:
    for batch in (2, 3, 5, 7):
        assert detect_warmup(_slow_then_fast(3), batch=batch) % batch == 0


def test_gradual_ramp_is_cut_near_its_end() -> None:
    r = np.random.default_rng(4)
    x = np.concatenate([np.linspace(0.3, 0.05, 40), np.full(180, 0.05)])
    x = x * (1 + 0.05 * r.standard_normal(x.size))
    assert 30 <= detect_warmup(x) <= 50


# ---------------------------------------------------------------- steady.py: edge cases


@pytest.mark.parametrize("n", [1, 2, 5, 9])  # empty: an error (test_steady_state_no_warmup_and_empty)
def test_short_series_is_zero(n: int) -> None:
    x = [0.5, *([0.05] * (n - 1))][:n]
    assert detect_warmup(x) == 0


def test_short_series_notice() -> None:
    s = steady_state([1.0, 0.1, 0.1])
    assert s.warmup_steps == 0
    assert s.notice is not None and "too few" in s.notice


def test_min_steps_raises_the_bar() -> None:
    x = _slow_then_fast(0)
    assert detect_warmup(x, min_steps=x.size + 1) == 0


def test_constant_series_is_zero() -> None:
    assert detect_warmup([0.1] * 100) == 0
    assert detect_warmup([0.0] * 100) == 0


def test_nearly_constant_series_has_no_rounding_cut() -> None:
    # Values equal up to the last bits must not make MSER cut on rounding noise.
    x = [0.1, 0.1 + 1e-17, 0.30000000000000004 - 0.2] * 40
    assert detect_warmup(x) <= 0.1 * len(x)


@pytest.mark.parametrize(
    "bad",
    [[math.nan] * 20, [-1.0] * 20, [math.nan, -0.5] * 10, [0.1] * 19 + [math.nan], [math.inf] + [0.1] * 19],
)
def test_invalid_durations_raise(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="NaN, infinite or negative"):
        detect_warmup(bad)


def test_invalid_arguments_raise() -> None:
    x = _stationary(0)
    with pytest.raises(ValueError, match="batch"):
        detect_warmup(x, batch=0)
    with pytest.raises(ValueError, match="max_fraction"):
        detect_warmup(x, max_fraction=0.0)
    with pytest.raises(ValueError, match="statistic"):
        detect_warmup(x, statistic="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        detect_warmup([[0.1, 0.2]])  # type: ignore[list-item]


def test_max_fraction_bounds_the_search() -> None:
    # Warm-up longer than the search window. Inside the window alone the minimum is at 0 (150 slow
    # and 50 fast steps vary less than 50 and 50), so the rule also looks past the window, discards
    # all of it and says so.
    r = np.random.default_rng(5)
    x = np.concatenate([np.full(150, 0.5), np.full(50, 0.05)]) * (1 + 0.02 * r.standard_normal(200))
    s = steady_state(x)
    assert s.warmup_steps == s.search_limit_steps == 100
    assert s.at_limit
    assert s.notice is not None and "run more steps" in s.notice
    assert detect_warmup(x, max_fraction=0.8) == 150
    assert not steady_state(x, max_fraction=0.8).at_limit


def test_stationary_series_rarely_hits_the_limit() -> None:
    assert not any(steady_state(_stationary(s, 100)).at_limit for s in range(200))


def test_steady_state_fields() -> None:
    x = _slow_then_fast(0)
    s = steady_state(x)
    assert s.method == "MSER, 5-step grid"
    assert s.n_steps == 220
    assert s.warmup_steps == 20
    assert s.steady_steps == 200
    assert s.steady_mean_s == pytest.approx(float(np.mean(x[20:])))
    assert s.steady_stdev_s == pytest.approx(float(np.std(x[20:], ddof=1)))
    assert s.warmup_mean_s == pytest.approx(float(np.mean(x[:20])))
    assert s.search_limit_steps == 110
    assert not s.at_limit
    assert s.notice is None
    d = asdict(s)
    assert d["warmup_steps"] == 20 and d["method"] == "MSER, 5-step grid"


def test_method_names() -> None:
    x = _slow_then_fast(0)
    assert steady_state(x, statistic="batch_means").method == "MSER-5"
    assert steady_state(x, batch=1).method == "MSER"


def test_steady_state_no_warmup_and_empty() -> None:
    s = steady_state([0.1] * 30)
    assert s.warmup_steps == 0 and s.warmup_mean_s is None and s.steady_mean_s == pytest.approx(0.1)
    one = steady_state([0.3])
    assert one.steady_stdev_s is None and one.steady_steps == 1
    with pytest.raises(ValueError, match="no step durations"):
        steady_state([])


# ---------------------------------------------------------------- repeats.py: t quantiles

# Reference values: scipy.stats.t.ppf((1 + c) / 2, df), to the digits shown.
T_REFERENCE = [
    (0.95, 1, 12.706204736174698),
    (0.95, 2, 4.302652729749464),
    (0.95, 3, 3.182446305284263),
    (0.95, 4, 2.7764451051977987),
    (0.95, 10, 2.228138851986274),
    (0.95, 29, 2.045229642132703),
    (0.95, 30, 2.0422724563012373),
    (0.95, 1000, 1.9623390808264078),
    (0.99, 5, 4.032142983557536),
    (0.90, 7, 1.894578605324),
    (0.50, 4, 0.7406971),
    (0.999, 1, 636.6192487687),
    (0.95, 100000, 1.9599877),
    (0.95, 1000000, 1.9599664),
]


@pytest.mark.parametrize(("confidence", "df", "expected"), T_REFERENCE)
def test_t_quantile_matches_reference(confidence: float, df: int, expected: float) -> None:
    assert t_quantile(confidence, df) == pytest.approx(expected, rel=1e-7)


def test_t_cdf_small_cases() -> None:
    # df = 1 is Cauchy, df = 2 has the closed form t / sqrt(2 + t^2).
    assert t_cdf_two_sided(1.0, 1) == pytest.approx(0.5)
    assert t_cdf_two_sided(3.0, 2) == pytest.approx(3.0 / math.sqrt(11.0))
    assert t_cdf_two_sided(0.0, 5) == 0.0
    assert t_cdf_two_sided(math.inf, 5) == 1.0


def test_t_quantile_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="confidence"):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError, match="df"):
        t_quantile(0.95, 0)


# ---------------------------------------------------------------- repeats.py: summaries


def test_known_answer_10_12_14() -> None:
    s = summarize([10, 12, 14])
    assert s.n == 3
    assert s.mean == 12.0
    assert s.median == 12.0
    assert s.stdev == pytest.approx(2.0)
    half = 4.302652729749464 * 2.0 / math.sqrt(3)
    assert s.ci_low == pytest.approx(12 - half)
    assert s.ci_high == pytest.approx(12 + half)
    assert s.t_quantile == pytest.approx(4.303, abs=5e-4)
    assert s.spread == pytest.approx(4 / 12)
    assert s.unstable
    assert s.notice is None


def test_spread_threshold_boundaries() -> None:
    stable = summarize([97.55, 100.0, 102.45])  # spread 4.9 %
    assert stable.spread == pytest.approx(0.049)
    assert not stable.unstable
    unstable = summarize([97.45, 100.0, 102.55])  # spread 5.1 %
    assert unstable.spread == pytest.approx(0.051)
    assert unstable.unstable
    # The rule is strict: exactly at the threshold is stable.
    assert not summarize([1.0, 2.0, 3.0], unstable_spread=1.0).unstable
    assert summarize([97.55, 100.0, 102.45], unstable_spread=0.04).unstable


def test_one_run() -> None:
    s = summarize([123.0])
    assert (s.n, s.mean, s.median) == (1, 123.0, 123.0)
    assert s.ci_low is None and s.ci_high is None and s.stdev is None and s.t_quantile is None
    assert s.spread == 0.0
    assert not s.unstable
    assert s.notice == ONE_RUN_NOTICE == "one run: no interval"
    assert asdict(s)["notice"] == "one run: no interval"


def test_identical_runs_have_a_zero_width_interval() -> None:
    s = summarize([5.0, 5.0, 5.0, 5.0])
    assert s.stdev == 0.0
    assert s.ci_low == s.ci_high == 5.0
    assert s.spread == 0.0 and not s.unstable


def test_median_zero_with_spread_is_unstable() -> None:
    s = summarize([-1.0, 0.0, 1.0])
    assert s.spread == math.inf and s.unstable


def test_other_confidence_levels() -> None:
    xs = [10.0, 12.0, 14.0, 11.0]
    s90, s95, s99 = (summarize(xs, confidence=c) for c in (0.90, 0.95, 0.99))
    assert s90.ci_high < s95.ci_high < s99.ci_high  # type: ignore[operator]
    assert s99.confidence == 0.99


def test_as_dict_fields() -> None:
    assert set(asdict(summarize([1.0, 2.0]))) == {
        "n",
        "mean",
        "median",
        "stdev",
        "ci_low",
        "ci_high",
        "confidence",
        "t_quantile",
        "spread",
        "unstable_spread",
        "unstable",
        "notice",
    }


@pytest.mark.parametrize(
    ("values", "kwargs", "match"),
    [
        ([], {}, "no values"),
        ([1.0, math.nan], {}, "NaN or infinite"),
        ([1.0, math.inf], {}, "NaN or infinite"),
        ([1.0, 2.0], {"confidence": 0.0}, "confidence"),
        ([1.0, 2.0], {"confidence": 1.5}, "confidence"),
        ([1.0, 2.0], {"unstable_spread": -0.1}, "unstable_spread"),
    ],
)
def test_summarize_rejects(values: list[float], kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        summarize(values, **kwargs)


def test_ci_coverage_is_nominal() -> None:
    # The interval's reason to exist: about 95 % of 95 % intervals from normal samples cover the
    # true mean. 4000 trials put the binomial standard error near 0.35 %.
    r = np.random.default_rng(7)
    hits = 0
    trials = 4000
    for _ in range(trials):
        s = summarize(list(r.normal(100.0, 5.0, 4)))
        hits += s.ci_low <= 100.0 <= s.ci_high  # type: ignore[operator]
    assert 0.935 <= hits / trials <= 0.965


# ---------------------------------------------------------------- repeats.py: properties

_runs = st.lists(
    st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False),
    min_size=2,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(_runs)
def test_property_ci_contains_the_mean(xs: list[float]) -> None:
    s = summarize(xs)
    assert s.ci_low is not None and s.ci_high is not None
    assert s.ci_low <= s.mean <= s.ci_high
    assert min(xs) <= s.mean <= max(xs)
    # symmetric about the mean
    assert (s.mean - s.ci_low) == pytest.approx(s.ci_high - s.mean, rel=1e-9, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(_runs, st.floats(min_value=1.01, max_value=100.0))
def test_property_ci_widens_with_spread(xs: list[float], k: float) -> None:
    # Stretch every run's distance from the mean by k: the interval widens by exactly k.
    m = statistics.fmean(xs)
    wide = [m + k * (x - m) for x in xs]
    a, b = summarize(xs), summarize(wide)
    wa = a.ci_high - a.ci_low  # type: ignore[operator]
    wb = b.ci_high - b.ci_low  # type: ignore[operator]
    assert wb >= wa
    assert wb == pytest.approx(k * wa, rel=1e-6, abs=1e-9 * max(1.0, abs(m)))


@settings(max_examples=100, deadline=None)
@given(_runs, st.floats(min_value=1e-3, max_value=1e3))
def test_property_scale_invariance(xs: list[float], c: float) -> None:
    # Throughput in samples/s or kilosamples/s: the verdict must not depend on the unit.
    a, b = summarize(xs), summarize([c * x for x in xs])
    assert b.spread == pytest.approx(a.spread, rel=1e-9)
    assert b.mean == pytest.approx(c * a.mean, rel=1e-9)
    assert b.ci_high == pytest.approx(c * a.ci_high, rel=1e-9)  # type: ignore[operator]


@settings(max_examples=100, deadline=None)
@given(_runs)
def test_property_more_confidence_wider_interval(xs: list[float]) -> None:
    lo, hi = summarize(xs, confidence=0.9), summarize(xs, confidence=0.99)
    assert hi.ci_low <= lo.ci_low and lo.ci_high <= hi.ci_high  # type: ignore[operator]


# Welch's t-test against scipy.stats.ttest_ind(b, a, equal_var=False) on the same samples, and the
# incomplete beta against scipy.special.betainc (values computed once with scipy 1.17.1)
@pytest.mark.parametrize(
    ("a", "b", "t", "df", "p"),
    [
        ([70, 100, 130], [90, 120, 150], 0.816496580927726, 4.0, 0.46005075284396096),
        ([99, 100, 101], [102, 103, 104], 3.6742346141747673, 4.0, 0.021311641128756713),
        (
            [1000, 1020, 990, 1010],
            [1100, 1050, 1080],
            4.507624797904254,
            2.7948025649679376,
            0.023690795850235917,
        ),
        (
            [5.1, 4.9, 5.0, 5.2, 4.8],
            [5.3, 5.6, 5.4],
            3.8334908600273216,
            4.473572938689223,
            0.015059282889962815,
        ),
    ],
)
def test_welch_test_matches_known_values(a, b, t, df, p):
    got = welch_test(summarize(a), summarize(b))
    assert got.t == pytest.approx(t, rel=1e-12)
    assert got.df == pytest.approx(df, rel=1e-12)
    assert got.p_value == pytest.approx(p, rel=1e-9)
    # the other way round: the same p, the opposite sign
    back = welch_test(summarize(b), summarize(a))
    assert back.t == pytest.approx(-t) and back.p_value == pytest.approx(p, rel=1e-9)


@pytest.mark.parametrize(
    ("a", "b", "x", "expected"),
    [
        (2.5, 0.5, 0.3, 0.018927124071945658),
        (0.7, 0.5, 0.99, 0.9201049015373419),
        (10, 0.5, 0.5, 0.00023344743474862207),
    ],
)
def test_incomplete_beta_matches_known_values(a, b, x, expected):
    assert betainc(a, b, x) == pytest.approx(expected, rel=1e-12)


def test_welch_test_edges():
    same = summarize([5.0, 5.0, 5.0])
    assert welch_test(same, same).p_value == 1.0  # no spread, no difference
    assert welch_test(same, summarize([6.0, 6.0])).p_value == 0.0  # no spread, a difference
    with pytest.raises(ValueError, match="two repeats or more"):
        welch_test(summarize([1.0]), same)
    assert t_sf_two_sided(2.0, 3.7) == pytest.approx(0.12181720190523398, rel=1e-9)  # non-integer df
