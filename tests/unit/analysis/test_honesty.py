"""Honesty notes (caches, a trainer lighter than asked) and the warm-up re-marking of a step log."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.analysis.honesty import cache_warnings, epoch1_vs_steady, epoch_delta
from iobench.cell.records import StepLog
from iobench.cell.steps.steploop import mark_warmup, step_durations
from iobench.results.figures import CacheState, EpochFigures, StepRow
from loaders import StageStats
from tests.helpers.summaries import epoch_figures


def _state(achieved: str, resident: float | None, method: str = "posix_fadvise(DONTNEED)") -> CacheState:
    return CacheState("cold", method, None, 100, resident, achieved, "")


DATASET_BYTES = 10 * 2**30
CELL = "cold"  # the cache state the cell asked for


def test_a_cold_run_that_was_not_cold_is_named_with_its_residency():
    notes = cache_warnings(CELL, [_state("cold", 0.0), _state("partly-cold", 0.4)], [], DATASET_BYTES, None)
    assert len(notes) == 1
    assert "repeat 2 of 2" in notes[0] and "40 %" in notes[0] and "partly-cold" in notes[0]


def test_a_dataset_that_fits_in_ram_and_could_not_be_evicted_is_said():
    notes = cache_warnings(CELL, [_state("unknown", None, method="none")], [], DATASET_BYTES, None)
    assert any("fits in RAM" in n for n in notes)


def test_server_caches_are_a_limitation_and_a_clean_local_cold_run_says_nothing():
    said = "RGW caches cannot be dropped"
    assert cache_warnings(CELL, [_state("cold", 0.0)], [], DATASET_BYTES, said) == [
        "limitation: RGW caches cannot be dropped"
    ]
    assert cache_warnings(CELL, [_state("cold", 0.01)], [], DATASET_BYTES, None) == []


def _epoch(epoch: int, samples_per_s: int) -> EpochFigures:
    return epoch_figures(epoch, samples_per_s, steps=10)  # in 1 s


def test_epoch_deltas():
    epochs = [_epoch(0, 400), _epoch(1, 500)]
    assert epoch_delta(epochs) == pytest.approx(0.25)
    assert epoch_delta(epochs[:1]) is None
    assert epoch1_vs_steady(epochs, 480.0) == pytest.approx(0.2)
    notes = cache_warnings(CELL, [_state("cold", 0.0)], epochs, DATASET_BYTES, None)
    assert any("+25 %" in n for n in notes)


def _log(ends: list[float]) -> StepLog:
    log = StepLog(created_at=100.0)
    start = 0.0
    for i, end in enumerate(ends):
        log.rows.append(StepRow(i, 0, False, start, 0.0, 0.0, 0.0, end, 4, 10))
        stats = StageStats(samples=4, bytes_read=10 * (i + 1))
        log.row_stats.append(stats)
        start = end
    return log


def test_mark_warmup_rebuilds_the_measured_interval_and_stats():
    log = _log([2.0, 2.1, 2.2, 2.3])
    assert step_durations(log) == pytest.approx([2.0, 0.1, 0.1, 0.1])
    mark_warmup(log, 1)
    assert [r.warmup for r in log.rows] == [True, False, False, False]
    assert log.measured_stats.bytes_read == 20 + 30 + 40
    assert log.measure_start == pytest.approx(102.0) and log.measure_end == pytest.approx(102.3)
    mark_warmup(log, 99)  # never all: one step stays measured
    assert [r.warmup for r in log.rows] == [True, True, True, False]


@settings(max_examples=200, deadline=None)
@given(
    slowed=st.one_of(st.none(), st.floats(0.05, 3.0)),
    quiet=st.sampled_from([True, False, None]),
)
def test_a_trainer_lighter_than_asked_is_said_only_from_a_quiet_timing(slowed, quiet):
    from dataclasses import replace

    from iobench.analysis.honesty import light_work_warnings
    from iobench.host.cpuload import SLOWED
    from tests.helpers.summaries import metrics

    m = replace(metrics(1000.0), trainer_alone_slowed=slowed, trainer_alone_quiet=quiet)
    said = light_work_warnings(m)
    light = quiet is True and slowed is not None and slowed < 1 / SLOWED
    assert bool(said) == light
    if light:
        (text,) = said
        assert f"ran {slowed:.2f}x the time it was sized to" in text
        assert f"about {100 * (1 - slowed):.0f} % less host work" in text
