"""`iobench compare`: cells matched by id across two runs, with changes judged against the noise."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from rich.console import Console

from iobench.report.compare import compare_runs, render_comparison
from iobench.results.store import RESULTS_NAME, publish_cell, write_results_table
from iobench.results.summary import CellSummary
from tests.helpers.summaries import cell_manifest, cell_spec, failed_summary, ok_summary


def _summary(cell_id: str, sps: float | None, *, runs: list[float] | None = None, **verdict) -> CellSummary:
    if sps is None:
        return failed_summary(cell_id)
    return ok_summary(cell_id, sps, runs=runs, **verdict)


def _run(path, *summaries: CellSummary):
    for s in summaries:
        publish_cell(path, s.cell_id, {"summary.json": s})
    write_results_table(path, order=[s.cell_id for s in summaries])
    return path


def _by_id(comparison: dict) -> dict:
    return {c["cell_id"]: c for c in comparison["cells"]}


def test_single_runs_use_the_5_percent_threshold(tmp_path):
    a = _run(tmp_path / "a", _summary("same", 100), _summary("up", 100), _summary("down", 100))
    b = _run(tmp_path / "b", _summary("same", 104), _summary("up", 110), _summary("down", 90))
    cells = _by_id(compare_runs(a, b))
    assert {c["rule"] for c in cells.values()} == {"threshold"}
    assert (cells["same"]["significant"], cells["same"]["direction"]) == (False, None)
    assert (cells["up"]["significant"], cells["up"]["direction"]) == (True, "faster")
    assert (cells["down"]["significant"], cells["down"]["direction"]) == (True, "slower")
    assert cells["up"]["ratio"] == pytest.approx(1.10)
    assert cells["up"]["samples_per_s"] == {"a": 100, "b": 110}
    assert cells["up"]["au"] == {"a": pytest.approx(0.1), "b": pytest.approx(0.11)}


def test_repeated_runs_use_welchs_t_test(tmp_path):
    # a 20 % change between widely spread repeats is noise (p = 0.46); a 3 % change between tight
    # ones is not (p = 0.021; both as scipy.stats.ttest_ind(equal_var=False) gives them)
    a = _run(
        tmp_path / "a",
        _summary("wide", 100, runs=[70, 100, 130]),
        _summary("tight", 100, runs=[99, 100, 101]),
    )
    b = _run(
        tmp_path / "b",
        _summary("wide", 120, runs=[90, 120, 150]),
        _summary("tight", 103, runs=[102, 103, 104]),
    )
    cells = _by_id(compare_runs(a, b))
    assert cells["wide"]["rule"] == cells["tight"]["rule"] == "welch"
    assert cells["wide"]["welch"]["p"] == pytest.approx(0.46005075, rel=1e-6)
    assert cells["tight"]["welch"]["p"] == pytest.approx(0.02131164, rel=1e-6)
    assert (cells["wide"]["significant"], cells["wide"]["direction"]) == (False, None)
    assert (cells["tight"]["significant"], cells["tight"]["direction"]) == (True, "faster")
    # the other way round: B slower than A
    cells = _by_id(compare_runs(b, a))
    assert cells["tight"]["direction"] == "slower"


def test_an_interval_in_only_one_run_falls_back_to_the_threshold(tmp_path):
    a = _run(tmp_path / "a", _summary("c", 100, runs=[99, 100, 101]))
    b = _run(tmp_path / "b", _summary("c", 103))
    (cell,) = compare_runs(a, b)["cells"]
    assert (cell["rule"], cell["significant"]) == ("threshold", False)


def test_cells_in_one_run_only_failed_cells_and_verdict_changes(tmp_path):
    a = _run(tmp_path / "a", _summary("both", 100), _summary("gone", None), _summary("only-a", 5))
    b = _run(
        tmp_path / "b", _summary("only-b", 7), _summary("gone", 50), _summary("both", 100, bound="fetch")
    )
    comparison = compare_runs(a, b)
    assert comparison["only_a"] == ["only-a"] and comparison["only_b"] == ["only-b"]
    cells = _by_id(comparison)
    assert list(cells) == ["both", "gone"]  # A's order
    assert cells["both"]["verdict"] == {"a": "prep (decode)", "b": "fetch (decode)", "changed": True}
    assert cells["gone"]["status"] == {"a": "failed", "b": "ok"}
    assert (cells["gone"]["rule"], cells["gone"]["ratio"], cells["gone"]["significant"]) == (None, None, None)
    # the --json form: plain data, no NaN or infinity
    json.dumps(comparison, allow_nan=False)


def test_a_run_without_results_table_is_compared_from_its_summaries(tmp_path):
    a = _run(tmp_path / "a", _summary("c", 100))
    b = _run(tmp_path / "b", _summary("c", 200))
    (b / RESULTS_NAME).unlink()
    (cell,) = compare_runs(a, b)["cells"]
    assert cell["ratio"] == 2.0


def test_the_terminal_table_names_the_rules_and_shows_paths_as_text(tmp_path):
    a = _run(
        tmp_path / "run[red]a", _summary("c", 100, runs=[99, 100, 101]), _summary("d", 100), _summary("x", 1)
    )
    b = _run(tmp_path / "b", _summary("c", 130, runs=[129, 130, 131]), _summary("d", 101), _summary("y", 1))
    console = Console(record=True, width=200)
    console.print(render_comparison(compare_runs(a, b)))
    text = console.export_text()
    assert "run[red]a" in text  # rich markup in a path is printed, not interpreted
    assert "rule [welch]: significant when Welch's t-test of the repeats' means, p < 0.05" in text
    assert "rule [threshold]: significant when change > 5 % (no repeats in both runs)" in text
    assert "faster [welch, p=" in text and "within noise [threshold]" in text
    assert "1.30x" in text and "100 → 130" in text
    assert "only in A: x" in text and "only in B: y" in text


def test_what_differs_between_the_configurations_comes_before_the_figures(tmp_path):
    def cell(cell_id: str, sps: float, sample_bytes: float, torch: str, **run) -> tuple:
        s = replace(ok_summary(cell_id, sps), cell=cell_spec(cell_id, **run))
        m = cell_manifest(s, mean_sample_bytes=sample_bytes)
        return s, replace(m, versions={**m.versions, "torch": torch})

    def run(path, *cells):
        for s, m in cells:
            publish_cell(path, s.cell_id, {"summary.json": s, "manifest.json": m})
        write_results_table(path, order=[s.cell_id for s, _ in cells])
        return path

    a = run(
        tmp_path / "a", cell("c", 100, 110e3, "2.13.0", epochs=2), cell("d", 100, 110e3, "2.13.0", epochs=2)
    )
    b = run(
        tmp_path / "b", cell("c", 188, 110e3, "2.14.1", epochs=6), cell("d", 190, 55e3, "2.14.1", epochs=6)
    )
    comparison = compare_runs(a, b)
    diffs = {d["setting"]: d for d in comparison["differences"]}
    assert set(diffs) == {"run.epochs", "versions.torch", "dataset.mean_sample_bytes", "dataset.total_bytes"}
    assert (diffs["run.epochs"]["a"], diffs["run.epochs"]["b"], diffs["run.epochs"]["cells"]) == (
        ["2"],
        ["6"],
        2,
    )
    assert diffs["dataset.mean_sample_bytes"]["cells"] == 1 and diffs["dataset.mean_sample_bytes"]["of"] == 2
    console = Console(record=True, width=200)
    console.print(render_comparison(comparison))
    text = console.export_text()
    assert text.index("the configurations differ") < text.index("iobench compare")  # before the table
    assert "run.epochs: 2 → 6" in text and "versions.torch: '2.13.0' → '2.14.1'" in text
    assert "dataset.mean_sample_bytes: 110000.0 → 55000.0 (in 1 of 2 cells)" in text
    same = compare_runs(a, a)
    assert same["differences"] == []
    console = Console(record=True, width=200)
    console.print(render_comparison(same))
    assert "the two runs' configurations agree" in console.export_text()


def test_a_reader_that_closes_the_pipe_ends_compare_quietly(tmp_path):
    import subprocess
    import sys

    a = _run(tmp_path / "a", *(_summary(f"c{i}", 100) for i in range(400)))
    proc = subprocess.run(
        f"{sys.executable} -m iobench.cli compare {a} {a} --json | head -c 100 > /dev/null; echo ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.stdout.strip() == "0" and "Broken pipe" not in proc.stderr and "Error" not in proc.stderr
