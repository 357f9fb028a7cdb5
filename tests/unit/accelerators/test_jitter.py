"""An emulated accelerator's compute as a distribution (issue 34): each draw has the configured mean
and cv, the draws repeat with the seed and differ across seeds and ranks, every step's draw is
recorded, and the sweep file's forms (ours, DLIO's stdev, this host's calibration) parse."""

from __future__ import annotations

import re
import statistics
import time

import numpy as np
import pytest
import torch

from iobench.accelerators import hostcost
from iobench.accelerators.consumers import EmulatedAccelerator, TorchTrainStep
from iobench.accelerators.demand import Demand, lookup_demand
from iobench.accelerators.jitter import check, factors
from iobench.analysis.steptimes import step_times
from iobench.cell.steps.steploop import run_steps
from iobench.results.spec import ComputeSpec
from iobench.sweep.checks import ConfigError
from iobench.sweep.config import parse_config
from tests.unit.analysis.test_metrics import _InjectedWaits
from tests.unit.sweep.test_config import _raw

N = 200_000


def _draws(dist: str, cv: float, seed: int = 1, rank: int = 0, n: int = N) -> np.ndarray:
    draw = factors(ComputeSpec(dist, cv, seed), rank)
    return np.array([draw() for _ in range(n)])


@pytest.mark.parametrize(
    ("dist", "cv"),
    [("normal", 0.1), ("gamma", 0.2), ("lognormal", 0.2), ("uniform", 0.2), ("exponential", 1.0)],
)
def test_each_distribution_has_mean_one_and_the_configured_cv(dist, cv):
    x = _draws(dist, cv)
    # standard errors at n = 200,000: mean cv/447 (<= 0.0023), cv under 0.4 % of it (exponential's 0.3 %)
    assert x.mean() == pytest.approx(1.0, abs=0.01)
    assert x.std(ddof=1) / x.mean() == pytest.approx(cv, rel=0.03)
    assert x.min() >= 0.0


def test_draws_repeat_with_the_seed_and_differ_across_seeds_and_ranks():
    a, b = _draws("gamma", 0.2, seed=7, n=1000), _draws("gamma", 0.2, seed=7, n=1000)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, _draws("gamma", 0.2, seed=8, n=1000))
    assert not np.array_equal(a, _draws("gamma", 0.2, seed=7, rank=1, n=1000))
    assert set(_draws("constant", 0.0, n=10)) == {1.0} and set(_draws("gamma", 0.0, n=10)) == {1.0}


@pytest.mark.parametrize(
    ("dist", "cv", "said"),
    [
        ("normal", 0.4, "normal allows at most 0.3"),
        ("uniform", 0.6, "uniform allows at most 0.577"),
        ("exponential", 0.5, "an exponential's cv is 1"),
        ("constant", 0.1, "a constant's cv is 0"),
        ("poisson", 0.1, "allowed values are constant, normal, gamma"),
        ("gamma", -0.1, "expected a number >= 0"),
    ],
)
def test_a_distribution_it_cannot_draw_says_why(dist, cv, said):
    assert said in check(dist, cv)


def test_each_step_sleeps_and_records_its_draw():
    spec = ComputeSpec("gamma", 0.3, seed=3)
    acc = EmulatedAccelerator(Demand("x", "m", "custom", 8 / 0.004, "test"), compute=spec)  # 4 ms mean
    log = run_steps(lambda e: _InjectedWaits([0.0] * 150), acc, created_at=time.perf_counter())
    drawn = [r.compute_draw_s for r in log.rows]
    assert statistics.fmean(drawn) == pytest.approx(0.004, rel=0.1)
    assert statistics.stdev(drawn) / statistics.fmean(drawn) == pytest.approx(0.3, rel=0.25)
    # each step lasted at least its draw (a sleep overshoots, never undershoots)
    assert all(r.compute_s >= r.compute_draw_s for r in log.rows)
    expected = factors(spec, 0)
    assert drawn == pytest.approx([0.004 * expected() for _ in drawn])
    assert acc.describe()["compute"] == {
        "dist": "gamma",
        "cv": 0.3,
        "seed": 3,
        "rank_streams": "SeedSequence([seed, rank])",
        "source": "given in the sweep file",
    }
    figures = step_times(log.rows, "emulated device time")
    assert figures.basis == "emulated draw" and figures.steps == 150
    assert figures.mean_s == pytest.approx(statistics.fmean(drawn)) and figures.p99_s <= figures.max_s


def test_a_constant_accelerator_records_its_constant_and_a_real_model_none():
    acc = EmulatedAccelerator(Demand("x", "m", "custom", 8 / 0.002, "test"))
    log = run_steps(lambda e: _InjectedWaits([0.0] * 5), acc, created_at=time.perf_counter())
    assert [r.compute_draw_s for r in log.rows] == pytest.approx([0.002] * 5)
    assert acc.describe()["compute"] == {"dist": "constant", "cv": 0.0}
    real = TorchTrainStep("small_cnn", device="cpu")
    real.step(*real.h2d(torch.zeros(2, 3, 32, 32, dtype=torch.uint8), torch.zeros(2, dtype=torch.int64))[:2])
    assert real.last_draw_s is None


def _accelerator(compute, **acc) -> object:
    raw = _raw(seed=11)
    raw["accelerators"] = [{"kind": "emulated", "type": "h100", "compute": compute, **acc}]
    return parse_config(raw).accelerators[0]


def test_the_sweep_file_forms():
    acc = _accelerator({"dist": "lognormal", "cv": 0.2})
    assert acc.compute == ComputeSpec("lognormal", 0.2, 11)  # the run's seed
    assert _accelerator({"cv": 0.1, "seed": 5}).compute == ComputeSpec("gamma", 0.1, 5)
    assert _accelerator({"dist": "exponential"}).compute.cv == 1.0
    # DLIO's computation_time_stdev: a normal around MLPerf Storage's 0.224 s
    dlio = _accelerator({"stdev": 0.0224}, demand="mlperf_storage").compute
    assert (dlio.dist, dlio.cv) == ("normal", pytest.approx(0.1)) and "0.224 s" in dlio.source
    assert lookup_demand("h100", "resnet50", "mlperf_storage").step_s == 0.224
    with pytest.raises(ConfigError, match=re.escape("accelerators[0].compute.stdev: DLIO's stdev is of its")):
        _accelerator({"stdev": 0.02})  # the training demand has no computation time per step
    with pytest.raises(ConfigError, match=re.escape("accelerators[0].compute.cv: missing")):
        _accelerator({"dist": "gamma"})
    with pytest.raises(ConfigError, match=re.escape("accelerators[0].compute.cv=0.5: normal allows at most")):
        _accelerator({"dist": "normal", "cv": 0.5})
    raw = _raw()
    raw["accelerators"] = [{"kind": "torch", "model": "small_cnn", "compute": {"cv": 0.1}}]
    with pytest.raises(ConfigError, match="compute is for kind: emulated"):
        parse_config(raw)


def test_cv_calibrated_takes_this_hosts_step_spread():
    with pytest.raises(ConfigError, match=re.escape("run `iobench calibrate --model resnet50` first")):
        _accelerator({"cv": "calibrated"})
    measured = hostcost.default_cost("resnet50")
    hostcost.keep_host_cost(
        measured.__class__(**{**measured.__dict__, "kind": "calibration", "step_cv": 0.07})
    )
    acc = _accelerator({"dist": "gamma", "cv": "calibrated"})
    assert acc.compute.cv == 0.07 and acc.compute.source.startswith("this host's calibration")


def test_a_real_models_step_times_are_its_measured_device_spans():
    from iobench.results.figures import StepRow

    spans = [0.050, 0.052, 0.048, 0.060, 0.050]
    rows = [
        StepRow(i, 0, i == 0, 0.0, 0.0, 0.0, 0.07, 0.0, 8, 0, device_s=s) for i, s in enumerate([0.5, *spans])
    ]
    figures = step_times(rows, "GPU busy (CUDA events)")
    assert figures.basis == "GPU busy (CUDA events)" and figures.steps == 5  # the warm-up step left out
    assert figures.mean_s == pytest.approx(statistics.fmean(spans))
    assert figures.cv == pytest.approx(statistics.stdev(spans) / statistics.fmean(spans))
    assert (figures.p50_s, figures.max_s) == (pytest.approx(0.050), 0.060)
    assert step_times(rows[:2], "x") is None
