"""The terminal report's words for a cell (shared with the HTML report through diagnosis_lines)."""

from __future__ import annotations

from dataclasses import replace

from iobench.report.terminal import diagnosis_lines
from tests.helpers.summaries import ok_summary


def test_the_report_sets_the_epoch_boundary_against_the_median_wait():
    s = ok_summary("disk-torch-w2", 500.0)  # AU 0.5: the median step waits 64 ms
    assert not any("epoch boundary" in text for text, _ in diagnosis_lines(s))
    m = replace(s.metrics, epoch_boundary_wait_ms=2 * s.metrics.wait_p50_ms)
    (line,) = [text for text, _ in diagnosis_lines(replace(s, metrics=m)) if "epoch boundary" in text]
    assert f"against a median step wait of {s.metrics.wait_p50_ms:.1f} ms (2.0 x)" in line
