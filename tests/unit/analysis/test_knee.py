"""The worker count that trains fastest (analysis/knee.py)."""

from __future__ import annotations

from dataclasses import replace

from iobench.analysis.knee import knees
from tests.helpers.summaries import cell_spec, ok_summary


def _cell(workers: int, rate: float, *, tier: str = "disk", host_work: str | None = "resnet50"):
    spec = cell_spec(f"{tier}-w{workers}", tier=tier, workers=workers)
    s = ok_summary(spec.cell_id, rate, cell=spec)
    described = "none (sleeps only, as DLIO)" if host_work is None else f"{host_work} on cuda, batch 64: ..."
    return replace(s, consumer={"kind": "emulated", "host_work": described})


def test_the_knee_is_the_fastest_count_and_more_workers_say_what_they_cost():
    (knee,) = knees([_cell(4, 1500.0), _cell(8, 1900.0), _cell(14, 1560.0), _cell(8, 900.0, tier="s3")])
    assert knee.best_workers == 8 and knee.best_samples_per_s == 1900.0
    assert knee.by_workers == ((4, 1500.0), (8, 1900.0), (14, 1560.0))
    lines = knee.lines()
    assert "trains fastest at 8 worker(s), 1,900 samples/s (host-emulated trainer)" in lines[0]
    assert lines[1].strip() == "more workers cost: 14: -18 %"


def test_a_sleep_only_trainer_is_told_its_knee_comes_later_for_a_real_one():
    (knee,) = knees([_cell(1, 400.0, host_work=None), _cell(2, 800.0, host_work=None)])
    assert knee.trainer == "sleep-only" and knee.best_workers == 2
    assert any("a real trainer's knee comes at fewer workers" in line for line in knee.lines())


def test_one_worker_count_has_no_knee():
    assert knees([_cell(4, 1500.0), _cell(4, 1400.0, tier="s3")]) == []
