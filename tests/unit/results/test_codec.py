"""A run directory written by schema v3 (the default sweep of iobench before the typed records,
tests/data/v3-run) still loads: typed summaries, the results table, steps, the terminal and HTML
reports, and compare against itself. A summary's ceilings, whichever were measured, read back as
they were written, and those on disk (a mapping of part to ceiling) read as the typed record."""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from iobench.report.compare import compare_runs
from iobench.report.terminal import print_report
from iobench.results.api import load_run, load_steps, load_summaries
from iobench.results.choices import CeilingPart, values
from iobench.results.codec import from_json, to_json
from iobench.results.figures import Ceiling, Ceilings
from iobench.results.schema import summary_to_row
from iobench.results.store import publish_cell, read_manifest, read_summary
from iobench.results.summary import CellSummary
from tests.helpers.paths import DATA
from tests.helpers.summaries import ok_summary

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


PARTS: tuple[CeilingPart, ...] = values(CeilingPart)


def _ceiling(part: CeilingPart, rate: float) -> Ceiling:
    return Ceiling(part, rate, 1000, 1000 / rate, bytes_per_s=rate * 110_000, method=f"the {part} alone")


def _with(rates: dict[CeilingPart, float]) -> CellSummary:
    return replace(
        ok_summary("disk-torch-w2", 500.0), ceilings=Ceilings(**{p: _ceiling(p, r) for p, r in rates.items()})
    )


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(PARTS), st.floats(0.5, 1e6, allow_nan=False)))
def test_ceilings_whichever_were_measured_read_back_as_written(rates):
    s = _with(rates)
    raw = json.loads(json.dumps(to_json(s)))
    # on disk the mapping of part to ceiling that summaries have always held; a part not measured is null
    assert {p: c["samples_per_s"] for p, c in raw["ceilings"].items() if c is not None} == rates
    assert all(c["name"] == p for p, c in raw["ceilings"].items() if c is not None)
    back = from_json(CellSummary, raw)
    assert back.ceilings == s.ceilings and back.ceilings.rates() == rates
    row = summary_to_row(back)
    assert [row[f"{p}_ceiling"] for p in PARTS] == [rates.get(p) for p in PARTS]


def test_a_summary_with_ceilings_is_written_to_its_cell_and_read_back(tmp_path):
    s = _with({"accelerator": 6_900.0, "prep": 1_300.0, "fetch": 12_400.0})
    publish_cell(tmp_path, s.cell_id, {"summary.json": s})
    back = read_summary(tmp_path, s.cell_id)
    assert back is not None and back.ceilings == s.ceilings
    assert back.ceilings.fetch.bytes_per_s == pytest.approx(12_400.0 * 110_000)
    assert back.ceilings.loader == s.ceilings.prep  # the lower of the input side's two


@pytest.mark.parametrize("run", ["v3-run", "report-run"])
def test_ceilings_on_disk_read_as_the_typed_record(run):
    for s in load_summaries(DATA / run):
        raw = json.loads((DATA / run / s.cell_id / "summary.json").read_text())["ceilings"]
        assert s.ceilings is not None and {c.name for c in s.ceilings.measured} == set(raw) == set(PARTS)
        for part in PARTS:
            assert getattr(s.ceilings, part) == from_json(Ceiling, raw[part])
        assert s.ceilings.rates() == {p: c["samples_per_s"] for p, c in raw.items()}


def test_a_mapping_of_some_ceilings_or_none_reads_with_the_others_unmeasured():
    raw = json.loads(next(V3.glob("*/summary.json")).read_text())
    probed = {k: raw["ceilings"][k] for k in ("accelerator", "fetch")}  # a probed job's two, no nulls
    s = from_json(CellSummary, {**raw, "ceilings": probed})
    assert s.ceilings.prep is None and s.ceilings.loader == s.ceilings.fetch is not None
    assert from_json(CellSummary, {**raw, "ceilings": None}).ceilings is None
    assert from_json(CellSummary, {k: v for k, v in raw.items() if k != "ceilings"}).ceilings is None
