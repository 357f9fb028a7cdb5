"""A measured cell's metrics and verdict, read by the report's views: a summary that breaks the
ok-cell contract names its cell instead of failing on None."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iobench.report.measured import metrics_of, verdict_of
from tests.helpers.summaries import failed_summary, ok_summary


def test_an_ok_cell_gives_its_own_metrics_and_verdict():
    s = ok_summary("disk-torch-w2", 500.0)
    assert metrics_of(s) is s.metrics and verdict_of(s) is s.verdict


@pytest.mark.parametrize("read", [metrics_of, verdict_of])
def test_a_cell_without_figures_is_named_with_its_status(read):
    failed = failed_summary("disk-torch-w4")
    with pytest.raises(ValueError, match=r"cell disk-torch-w4 \(failed\)"):
        read(failed)
    broken = replace(ok_summary("disk-torch-w8", 500.0), metrics=None, verdict=None)
    with pytest.raises(ValueError, match=r"cell disk-torch-w8 \(ok\)"):
        read(broken)
