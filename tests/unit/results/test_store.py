from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from iobench.results.schema import RESULT_SCHEMA
from iobench.results.store import load_results, publish_cell, read_summary, write_results_table
from iobench.results.summary import SCHEMA_VERSION
from tests.helpers.summaries import failed_summary


class _Exploding:
    """Not JSON-serialisable: writing it fails halfway through a cell's files."""


def test_a_cell_appears_whole_or_not_at_all(tmp_path):
    with pytest.raises(TypeError):
        publish_cell(tmp_path, "c1", {"summary.json": {"ok": 1}, "manifest.json": {"bad": _Exploding()}})
    assert list(tmp_path.iterdir()) == []  # no cell directory, no staging left behind

    publish_cell(tmp_path, "c1", {"summary.json": {"v": 1}, "steps.parquet": pa.table({"x": [1, 2]})})
    assert json.loads((tmp_path / "c1" / "summary.json").read_text()) == {"v": 1}
    assert pq.read_table(tmp_path / "c1" / "steps.parquet").column("x").to_pylist() == [1, 2]

    # a failed re-run leaves the previous result in place
    with pytest.raises(TypeError):
        publish_cell(tmp_path, "c1", {"summary.json": {"bad": _Exploding()}})
    assert json.loads((tmp_path / "c1" / "summary.json").read_text()) == {"v": 1}
    # a successful re-run replaces it
    publish_cell(tmp_path, "c1", {"summary.json": {"v": 2}})
    assert json.loads((tmp_path / "c1" / "summary.json").read_text()) == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c1"]


def test_results_table_has_a_row_per_cell_including_failures(tmp_path):
    publish_cell(tmp_path, "disk-w0", {"summary.json": failed_summary("disk-w0", "OSError: boom")})
    write_results_table(tmp_path)
    table = load_results(tmp_path)
    assert table.schema.equals(RESULT_SCHEMA)
    row = table.to_pylist()[0]
    assert row["status"] == "failed" and row["verdict"] == "failed" and row["error"] == "OSError: boom"
    assert read_summary(tmp_path, "disk-w0").schema_version == SCHEMA_VERSION


def test_the_object_client_is_a_column_of_its_own_null_where_none_reads(tmp_path):
    # a built-in's name, another package's (it reads back on a host without that package) and none
    for cell_id, client in (("rgw-obstore", "obstore"), ("rgw-mine", "mine"), ("disk", None)):
        summary = replace(failed_summary(cell_id), client=client)
        publish_cell(tmp_path, cell_id, {"summary.json": summary})
        assert read_summary(tmp_path, cell_id) == summary
    write_results_table(tmp_path)
    rows = {r["cell_id"]: r["client"] for r in load_results(tmp_path).to_pylist()}
    assert rows == {"rgw-obstore": "obstore", "rgw-mine": "mine", "disk": None}


def test_load_results_names_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="iobench run directory"):
        load_results(tmp_path)
