"""`iobench report`'s command (report/cli.py): what it checks before it prints anything."""

from __future__ import annotations

import argparse
import sys

import pytest
from rich.console import Console

from iobench.report.cli import report_command
from iobench.results.store import publish_cell
from tests.helpers.summaries import ok_summary


def test_html_without_its_extra_fails_before_the_report_is_printed(tmp_path, monkeypatch):
    s = ok_summary("disk-torch-w2", 500.0)
    publish_cell(tmp_path, s.cell_id, {"summary.json": s})
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the [html] extra were not installed
    console = Console(record=True, width=120)
    args = argparse.Namespace(run_dir=str(tmp_path), html="", mlperf=False, json=False, detail=False)
    with pytest.raises(ImportError, match=r"iobench\[html\]"):
        report_command(args, console)
    assert console.export_text() == ""
