"""A cell's figures over its repeats (analysis/cellfigures.py, analyse_cell): the repeat it quotes is
the median one, every repeat is counted in order, the warnings are the caches' then the setup's, and
the job at scale carries the modelled all-reduce it is given."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given
from hypothesis import strategies as st

from iobench.analysis.cellfigures import (
    Analysis,
    SetupFacts,
    analyse,
    analyse_cell,
    median_run,
)
from iobench.analysis.repeats import ONE_RUN_NOTICE
from iobench.results.figures import CacheState, StepAlone, StepRow
from loaders import StageStats
from tests.helpers.summaries import cell_spec, run_facts


@dataclass
class Run:
    """One measured repeat as a cell keeps it (cell/records.py, Measurement), with what the figures read."""

    analysis: Analysis
    rows: list[StepRow]
    cache_state: CacheState | None
    alone: StepAlone | None = None


def _rows(wait_s: float, steps: int = 40, compute_s: float = 0.02, warmup: int = 3) -> list[StepRow]:
    rows, t = [], 0.0
    for i in range(steps):
        end = t + wait_s + compute_s
        rows.append(
            StepRow(i, 0, i < warmup, t, wait_s, 0.0, compute_s, end, 64, 64 * 100_000, device_s=compute_s)
        )
        t = end
    return rows


def _run(wait_s: float, achieved: str = "cold") -> Run:
    rows = _rows(wait_s)
    analysis = analyse(rows, facts=run_facts(), epoch_stats=[StageStats()], measured_stats=StageStats())
    state = CacheState("cold", "posix_fadvise(DONTNEED)", None, 100, 0.0, achieved, "")
    return Run(analysis, rows, state)


def _facts(**changes) -> SetupFacts:
    facts = SetupFacts(
        cell=cell_spec(),
        exposed_allreduce=None,
        mlperf_threshold=0.9,
        dataset_bytes=2**40,  # larger than any RAM: no note that it fits
        server_caches=None,
    )
    return replace(facts, **changes)


_ANALYSIS = _run(0.01).analysis


@given(st.lists(st.floats(min_value=1.0, max_value=1e6, allow_nan=False), min_size=1, max_size=9))
def test_the_repeat_quoted_is_the_median_one_the_lower_of_an_even_count(rates):
    runs = [
        Run(replace(_ANALYSIS, metrics=replace(_ANALYSIS.metrics, samples_per_s=r)), [], None) for r in rates
    ]
    assert rates[median_run(runs)] == sorted(rates)[(len(rates) - 1) // 2]


def test_every_repeat_is_counted_in_order_and_the_figures_are_the_chosen_ones():
    runs = [_run(0.005), _run(0.04, achieved="partly-cold"), _run(0.01)]
    figures = analyse_cell(runs, _facts())
    rates = [r.analysis.metrics.samples_per_s for r in runs]
    assert rates[0] > rates[2] > rates[1]
    assert figures.chosen == 2  # the median rate
    assert [f.samples_per_s for f in figures.repeats] == rates
    assert [f.cache for f in figures.repeats] == ["cold", "partly-cold", "cold"]
    assert figures.stability.samples_per_s.n == 3
    assert figures.warmup_steps == 3
    assert figures.mlperf is not None and figures.mlperf.accelerators == 1
    assert figures.mlperf.samples_per_s == rates[2]


def test_the_warnings_are_the_caches_then_the_setups_own():
    runs = [_run(0.01), _run(0.01, achieved="partly-cold")]
    figures = analyse_cell(
        runs, _facts(server_caches="RGW keeps objects in memory", notes=("JPEG decode: x",))
    )
    (cold, server, said) = figures.warnings
    assert "repeat 2 of 2 was asked to be cold but was partly-cold" in cold
    assert server == "limitation: RGW keeps objects in memory"
    assert said == "JPEG decode: x"


def test_the_job_at_scale_waits_for_the_all_reduce_it_is_given():
    runs = [_run(0.001)]
    alone = analyse_cell(runs, _facts())
    assert analyse_cell(runs, _facts(exposed_allreduce=lambda world, compute: 0.0)).scale == alone.scale
    slow = analyse_cell(runs, _facts(exposed_allreduce=lambda world, compute: 0.05 * (world > 1)))
    at = {p.world_size: p.au for p in alone.scale}
    assert {p.world_size: p.au for p in slow.scale}[8] < at[8]
    assert alone.scale_queue_depth == 0  # batches not stamped with their making: no queue replayed
    stamped = replace(
        runs[0], rows=[replace(r, begun_s=r.t_start, ready_s=r.t_start + r.wait_s) for r in runs[0].rows]
    )
    assert analyse_cell([stamped], _facts()).scale_queue_depth == 2 * cell_spec().loader.prefetch
    assert alone.scale_method and alone.step_times is not None


def test_one_repeat_has_no_interval_and_one_epoch_no_delta():
    figures = analyse_cell([_run(0.01)], _facts())
    assert figures.chosen == 0 and len(figures.repeats) == 1
    assert figures.stability.samples_per_s.n == 1
    assert figures.stability.samples_per_s.notice == ONE_RUN_NOTICE
    assert figures.stability.samples_per_s.ci_low is None
    assert figures.epoch_delta is None  # one epoch: nothing to hold epoch 1 against
