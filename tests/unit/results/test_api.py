"""The public results API (iobench.results): runs and steps back as pyarrow tables."""

from __future__ import annotations

import sys
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iobench.results import load_run, load_runs, load_steps, to_pandas
from iobench.results.schema import RESULT_SCHEMA, STEP_SCHEMA
from iobench.results.store import RESULTS_NAME, publish_cell, write_results_table
from iobench.results.summary import CellSummary
from tests.helpers.summaries import failed_summary, ok_summary


def _summary(cell_id: str, samples_per_s: float | None, status: str = "ok") -> CellSummary:
    if status != "ok":
        return failed_summary(cell_id)
    summary = ok_summary(cell_id, samples_per_s)
    return replace(summary, metrics=replace(summary.metrics, au=0.5, stall_fraction=0.5))


def _steps(n: int, cell_id: str | None) -> pa.Table:
    """Steps as a cell writes them; ``cell_id`` None: as schema v3 wrote them, without the column."""
    rows = [
        {
            "cell_id": cell_id,
            "step": i,
            "epoch": 0,
            "warmup": i < 2,
            "t_start": 0.1 * i,
            "wait_s": 0.05,
            "h2d_s": 0.0,
            "compute_s": 0.05,
            "t_end": 0.1 * (i + 1),
            "samples": 16,
            "bytes_read": 1000,
        }
        for i in range(n)
    ]
    table = pa.Table.from_pylist(rows, schema=STEP_SCHEMA)
    return table if cell_id else table.drop_columns(["cell_id"])


@pytest.fixture
def run(tmp_path):
    run_dir = tmp_path / "run"
    publish_cell(
        run_dir, "b-cell", {"summary.json": _summary("b-cell", 200.0), "steps.parquet": _steps(5, "b-cell")}
    )
    publish_cell(
        run_dir, "a-cell", {"summary.json": _summary("a-cell", 100.0), "steps.parquet": _steps(3, None)}
    )
    publish_cell(run_dir, "gone", {"summary.json": _summary("gone", None, status="failed")})
    write_results_table(run_dir, order=["b-cell", "a-cell", "gone"])
    return run_dir


def test_load_run_reads_the_results_table(run):
    table = load_run(run)
    assert table.schema.equals(RESULT_SCHEMA)
    assert table.column("cell_id").to_pylist() == ["b-cell", "a-cell", "gone"]  # the sweep's order
    assert table.column("status").to_pylist() == ["ok", "ok", "failed"]


def test_load_run_rebuilds_a_missing_table_from_the_summaries_without_writing(run):
    (run / RESULTS_NAME).unlink()
    table = load_run(str(run))  # a str works as well as a Path
    assert table.schema.equals(RESULT_SCHEMA)
    assert sorted(table.column("cell_id").to_pylist()) == ["a-cell", "b-cell", "gone"]
    rows = {r["cell_id"]: r["samples_per_s"] for r in table.to_pylist()}
    assert rows == {"a-cell": 100.0, "b-cell": 200.0, "gone": None}
    assert not (run / RESULTS_NAME).exists()


def test_load_run_names_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="is it an iobench run directory"):
        load_run(tmp_path)


def test_load_runs_adds_a_run_column_and_fills_missing_columns_with_nulls(run, tmp_path):
    old = tmp_path / "old"
    publish_cell(old, "a-cell", {"summary.json": _summary("a-cell", 90.0)})
    write_results_table(old)
    # a run from an iobench that had no AU column yet
    pq.write_table(pq.read_table(old / RESULTS_NAME).drop_columns(["au"]), old / RESULTS_NAME)

    table = load_runs([run, old])
    assert table.column_names[0] == "run"
    assert table.column("run").to_pylist() == [str(run)] * 3 + [str(old)]
    assert table.column("au").to_pylist() == [0.5, 0.5, None, None]
    assert table.column("samples_per_s").to_pylist()[-1] == 90.0


def test_load_runs_needs_at_least_one_run():
    with pytest.raises(ValueError, match="no run directories"):
        load_runs([])


def test_load_steps_of_every_cell_with_steps_and_of_one(run):
    every = load_steps(run)
    assert every.column_names == STEP_SCHEMA.names  # the v3 table's cell_id is added from its folder
    assert every.column("cell_id").to_pylist() == ["a-cell"] * 3 + ["b-cell"] * 5  # the failed cell has none
    one = load_steps(run, "b-cell")
    assert one.num_rows == 5 and set(one.column("cell_id").to_pylist()) == {"b-cell"}
    assert one.column("warmup").to_pylist() == [True, True, False, False, False]


def test_load_steps_of_a_cell_without_steps_names_those_that_have_them(run):
    with pytest.raises(FileNotFoundError, match=r"cells of .* with steps: a-cell, b-cell"):
        load_steps(run, "gone")


def test_to_pandas_without_pandas_says_how_to_install_it(run, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match="pip install pandas"):
        to_pandas(load_run(run))


def test_to_pandas_with_pandas(run):
    pytest.importorskip("pandas", reason="pandas is optional and not installed here")
    frame = to_pandas(load_steps(run))
    assert list(frame["cell_id"].unique()) == ["a-cell", "b-cell"]
