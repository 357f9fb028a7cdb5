"""A run directory written by schema v3 (the default sweep of iobench before the typed records,
tests/data/v3-run) still loads: typed summaries, the results table, steps, the terminal and HTML
reports, and compare against itself."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from rich.console import Console

from iobench.report.compare import compare_runs
from iobench.report.terminal import print_report
from iobench.results.api import load_run, load_steps, load_summaries
from iobench.results.store import read_manifest
from tests.helpers.paths import DATA

V3 = DATA / "v3-run"


def test_a_v3_run_loads_as_typed_records():
    summaries = load_summaries(V3)
    assert [s.cell.loader.workers for s in summaries] == [0, 1, 2]  # the sweep's order
    for s in summaries:
        raw = json.loads((V3 / s.cell_id / "summary.json").read_text())
        assert raw["schema_version"] == 3 and s.ok
        assert s.metrics.samples_per_s == raw["metrics"]["samples_per_s"]
        assert s.verdict.bound == "prep" and s.verdict.evidence == tuple(raw["verdict"]["evidence"])
        assert s.attribution.capacity.checks[0].count == 1  # nested records, down to the capacity check
        assert s.cell.loader.options == {}  # a field v3 did not have takes its default
        assert read_manifest(V3, s.cell_id).host.usable_cpus >= 1
    assert load_run(V3).num_rows == 3
    steps = load_steps(V3)
    assert set(steps.column("cell_id").to_pylist()) == {s.cell_id for s in summaries}


def test_a_v3_run_reports_and_compares(tmp_path):
    out = io.StringIO()
    print_report(load_summaries(V3), Console(file=out, width=200))
    assert "prep-bound (CPU JPEG decode)" in out.getvalue()
    comparison = compare_runs(V3, V3)
    assert [c["ratio"] for c in comparison["cells"]] == [1.0, 1.0, 1.0]
    from iobench.report.html import write_html

    run = tmp_path / "v3"
    shutil.copytree(V3, run)
    page = write_html(run).read_text()
    assert page.count('<section class="cell"') == 3


def test_a_value_read_back_must_be_one_its_type_allows():
    from iobench.results.codec import RecordError, from_json
    from iobench.results.figures import CacheState

    state = {"requested": "cold", "method": "none", "resident_bytes_before": 0, "total_bytes": 1}
    state |= {"resident_fraction_before": 0.0, "note": ""}
    assert from_json(CacheState, {**state, "achieved": "partly-cold"}).achieved == "partly-cold"
    with pytest.raises(RecordError, match=r"CacheState.achieved: 'lukewarm' is not one of 'cold', 'warm'"):
        from_json(CacheState, {**state, "achieved": "lukewarm"})
