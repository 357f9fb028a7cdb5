"""The differential attribution's arithmetic on known inputs, and the config keys that drive it."""

from __future__ import annotations

import math

import pytest

from iobench.analysis.differential import capacity, combine, input_ceiling
from iobench.analysis.verdict import Verdict
from iobench.sweep.config import ConfigError, parse_config


def _online(bound: str, readers_rate: float | None = None) -> Verdict:
    return Verdict(bound=bound, binding_stage=None, headline="", pipeline_capacity_samples_per_s=readers_rate)


def _combine(ceilings, bound, measured=500.0, readers_rate=None):
    return combine(ceilings, _online(bound, readers_rate), measured_samples_per_s=measured, au=0.1)


def test_the_lowest_ceiling_binds_and_the_others_get_their_headroom():
    a = _combine({"accelerator": 7000.0, "prep": 500.0, "fetch": 2000.0}, "prep")
    assert a.binding == "prep" and a.agree
    assert a.predicted_samples_per_s == 500.0
    assert a.headroom == {"accelerator": 14.0, "prep": 1.0, "fetch": 4.0}
    assert a.prediction_error == pytest.approx(0.0)
    assert "agree" in a.statement


def test_disagreement_is_said_not_hidden():
    a = _combine({"accelerator": 7000.0, "prep": 500.0, "fetch": 200.0}, "prep", measured=190.0)
    assert a.binding == "fetch" and not a.agree
    assert "disagree" in a.statement and "prep-bound" in a.statement
    assert a.prediction_error == pytest.approx(200 / 190 - 1)  # predicted / measured - 1


def test_ceilings_within_the_tolerance_accept_either_name():
    # prep and fetch 10 % apart: neither method can tell them apart, so both verdicts agree
    assert _combine({"prep": 500.0, "fetch": 550.0}, "fetch").agree
    assert not _combine({"prep": 500.0, "fetch": 600.0}, "fetch").agree


def test_missing_or_zero_ceilings_are_ignored_and_none_is_an_error():
    assert _combine({"prep": 0.0, "fetch": 300.0, "accelerator": None}, "fetch").binding == "fetch"
    with pytest.raises(ValueError, match="no ceiling"):
        _combine({"prep": 0.0}, "prep")


@pytest.mark.parametrize(
    ("ceiling", "demand", "expected"),
    [
        (1000.0, 100.0, 11),
        (900.0, 100.0, 10),
        (899.0, 100.0, 9),
        (80.0, 100.0, 0),
        (1786.0 * 0.9 * 4, 1786.0, 4),
    ],
)
def test_capacity_is_the_largest_count_kept_at_90_percent(ceiling, demand, expected):
    answer = capacity(ceiling, demand)
    assert answer.max_accelerators == expected
    n = expected
    if n:
        assert answer.predicted_au_at_max >= 0.9 - 1e-9
    assert answer.predicted_au_at_max_plus_one < 0.9
    assert math.isclose(answer.predicted_au_at_max_plus_one, min(1.0, ceiling / ((n + 1) * demand)))


def test_a_trainer_that_cannot_reach_its_demand_alone_caps_every_count():
    # the trainer alone takes 2,900/s of the 7,000/s demanded: AU at most 0.41, whatever the storage
    answer = capacity(50_000.0, 7000.0, takes=2900.0)
    assert answer.max_accelerators == 0
    assert answer.predicted_au_at_max_plus_one == pytest.approx(2900 / 7000)
    assert answer.trainer_takes_per_accelerator == 2900.0
    # one that reaches 90 % of it alone: the storage sets the count, each accelerator at its take
    answer = capacity(20_000.0, 7000.0, takes=6500.0)
    assert answer.max_accelerators == 3
    assert answer.predicted_au_at_max == pytest.approx(6500 / 7000)


def _raw(**run):
    return {
        "dataset": {"path": "/tmp/x"},
        "tiers": [{"kind": "local", "path": "/tmp/x"}],
        "loaders": [{"kind": "torch"}],
        "accelerators": [{"kind": "emulated", "type": "h100"}],
        "run": run,
    }


def test_run_keys_for_warmup_repeats_and_diagnose():
    cfg = parse_config(_raw())
    run = cfg.run.settings
    assert run.warmup_steps == "auto" and run.repeats == 1 and run.diagnose is False
    cfg = parse_config(_raw(warmup_steps=3, repeats=5, diagnose=True))
    run = cfg.run.settings
    assert (run.warmup_steps, run.repeats, run.diagnose) == (3, 5, True)
    for bad, match in (
        ({"warmup_steps": "soon"}, "run.warmup_steps='soon': expected auto"),
        ({"repeats": 0}, "run.repeats=0"),
        ({"diagnose": "yes"}, "run.diagnose='yes'"),
    ):
        with pytest.raises(ConfigError, match=match):
            parse_config(_raw(**bad))


def test_a_custom_accelerator_names_its_own_demand():
    raw = _raw()
    raw["accelerators"] = [{"kind": "emulated", "type": "custom", "samples_per_s": 150, "count": 2}]
    cfg = parse_config(raw)
    assert cfg.accelerators[0].samples_per_s == 150.0
    assert "custom150x2" in cfg.cells()[0].cell_id
    for acc, match in (
        ({"type": "custom"}, "samples_per_s: a number"),
        ({"type": "h100", "samples_per_s": 10}, "type: custom"),
        ({"type": "custom", "samples_per_s": -1}, "expected a number > 0"),
    ):
        raw["accelerators"] = [{"kind": "emulated", **acc}]
        with pytest.raises(ConfigError, match=match):
            parse_config(raw)


def test_the_input_ceiling_is_never_below_what_the_cell_delivered():
    # measured here: a prep ceiling run while the host was busier timed 173/s; the cell delivered 581/s
    assert input_ceiling(173.0, 4587.0, 581.0) == 581.0
    assert input_ceiling(675.0, 11_118.0, 589.0) == 675.0
    assert input_ceiling(9_000.0, 3_000.0, 2_500.0) == 3_000.0
    answer = capacity(input_ceiling(173.0, 4587.0, 581.0), 7000.0, takes=6878.0)
    assert answer.predicted_au_at_max_plus_one == pytest.approx(581 / 7000)
