"""The HTML report's figures tell every cell apart: one colour per tier, a marker per loader setup and a
line style per worker count, the same in every figure, with no series hidden behind another."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from matplotlib.colors import to_hex, to_rgba
from matplotlib.lines import Line2D

from iobench.report import plots
from iobench.results.figures import EpochFigures
from iobench.results.summary import CellSummary
from tests.helpers.summaries import cell_spec, epoch_figures, ok_summary

TIERS = ("local", "minio_nvme", "rados_ram", "cephfs_ram")


def _epoch(epoch: int, ratio: float) -> EpochFigures:
    """An epoch of 16 shards whose cache served ``ratio`` of them."""
    hits = int(16 * ratio)
    return epoch_figures(
        epoch,
        1024,
        steps=16,
        wall_s=2.0,
        bytes_read=2**27,
        stall_fraction=0.5,
        cache_hits=hits,
        cache_misses=16 - hits,
    )


@pytest.fixture(scope="module")
def run() -> list[CellSummary]:
    """32 cells: 4 tiers x 2 loaders x cold/warm x 2 worker counts, every cache going 0 %, 100 %, 100 %
    (as equal as the issue's 8 cells that drew as 4 lines), and a failed cell, which is not drawn."""
    cells = []
    for i, (tier, kind, cache, workers) in enumerate(
        itertools.product(TIERS, ("torch", "nodes"), ("cold", "warm"), (1, 2))
    ):
        spec = cell_spec(f"{tier}-{kind}-w{workers}-{cache}", tier=tier, workers=workers)
        spec = replace(spec, cache=cache, loader=replace(spec.loader, kind=kind))
        s = ok_summary(spec.cell_id, 300.0 + 10 * i, cell=spec)
        cells.append(replace(s, epochs=[_epoch(0, 0.0), _epoch(1, 1.0), _epoch(2, 1.0)]))
    return [*cells, CellSummary.failed(cell_spec("gone-torch-w1", tier="gone"), "TierConfigError: gone")]


@pytest.fixture
def figures(monkeypatch) -> list:
    """The matplotlib figures the plots draw, instead of their SVG."""
    drawn: list = []
    monkeypatch.setattr(plots, "_svg", lambda fig, prefix: drawn.append(fig) or prefix)
    return drawn


def _look(line: Line2D) -> tuple[str, str, str]:
    return to_hex(line.get_color()), line.get_marker(), line.get_linestyle()


def _expected(style: plots.CellStyle) -> tuple[str, str, str]:
    return _look(Line2D([], [], **style.line()))


def test_sixteen_and_more_cells_each_get_their_own_look_and_a_tier_one_colour(run):
    styles = plots.cell_styles(run)
    assert list(styles) == sorted(styles, key=lambda c: (c.split("-")[0], c))  # grouped by tier
    assert len(styles) == 32 and "gone-torch-w1" not in styles
    assert len({(s.colour, s.marker, s.linestyle) for s in styles.values()}) == 32
    colours = {t: {s.colour for c, s in styles.items() if c.startswith(f"{t}-")} for t in TIERS}
    assert all(len(c) == 1 for c in colours.values())
    assert len(set.union(*colours.values())) == 4
    # a setup (loader, cache state) has one marker and a worker count one line style, in every tier
    markers = defaultdict(set)
    for c, s in styles.items():
        _, kind, _, cache = c.split("-")
        markers[(kind, cache)].add(s.marker)
    assert all(len(m) == 1 for m in markers.values()) and len(set.union(*markers.values())) == 4
    assert {s.linestyle for c, s in styles.items() if "-w1-" in c} == {"-"}
    assert {s.linestyle for c, s in styles.items() if "-w2-" in c} == {"--"}


def test_twenty_tiers_keep_their_colours_apart():
    run = [
        ok_summary(f"t{i:02}-torch-w1", 300.0, cell=cell_spec(f"t{i:02}-torch-w1", tier=f"t{i:02}"))
        for i in range(20)
    ]
    assert len({s.colour for s in plots.cell_styles(run).values()}) == 20


def test_a_cell_looks_the_same_in_every_figure(run, figures):
    styles = plots.cell_styles(run)
    wait = pa.table({"warmup": [True] + [False] * 9, "wait_s": np.linspace(0.0, 0.05, 10)})
    plots.throughput_svg(run, styles, "throughput")
    plots.attribution_svg(run, styles, "attribution")
    plots.au_workers_svg(run, styles, "au-workers")
    plots.wait_cdf_svg({s.cell_id: wait for s in run if s.ok}, styles, "wait")
    plots.cache_hit_svg(run, styles, "cache-hit")
    throughput, attribution, au, cdf, cache = figures

    for fig in (throughput, attribution):  # the bar charts' key: a line in each cell's look by its name
        key, _ = fig.axes
        names = [t.get_text().split(" (")[0] for t in key.get_yticklabels()]
        assert names == list(styles)
        assert [_look(line) for line in key.get_lines()] == [_expected(styles[c]) for c in names]
    assert [b.get_facecolor() for b in throughput.axes[1].patches] == [
        to_rgba(s.colour) for s in styles.values()
    ]
    for fig in (cdf, cache):  # the line figures name every cell, each drawn in its look
        (legend,) = fig.legends
        assert [t.get_text() for t in legend.get_texts()] == list(styles)
        assert [_look(line) for line in fig.axes[0].get_lines()] == [_expected(s) for s in styles.values()]
        assert [_look(h) for h in legend.legend_handles] == [_expected(s) for s in styles.values()]
    # AU against workers: a solid line per tier and setup, in its cells' colour and marker
    labels = [t.get_text() for t in au.legends[0].get_texts()]
    assert len(labels) == 16
    for label, line in zip(labels, au.axes[0].get_lines(), strict=False):  # the last line: the 90 % rule
        tier, kind, cache = label.split(" / ")
        for workers in (1, 2):
            colour, marker, _ = _expected(styles[f"{tier}-{kind}-w{workers}-{cache}"])
            assert _look(line) == (colour, marker, "-")


def test_equal_series_are_set_apart_so_every_one_shows(run, figures):
    styles = plots.cell_styles(run)
    plots.cache_hit_svg(run, styles, "cache-hit")
    plots.au_workers_svg([replace(s, metrics=replace(s.metrics, au=0.95)) for s in run if s.ok], styles, "au")
    cache, au = figures
    # 32 cells with equal hit ratios: no two draw a point in the same place, and each stays nearer its epoch than the next
    xs = [tuple(line.get_xdata()) for line in cache.axes[0].get_lines()]
    assert len(xs) == 32 and len({x for pts in xs for x in pts}) == 3 * 32
    assert all(abs(x - round(x)) < 0.4 for pts in xs for x in pts)
    # 16 AU lines all at 95 %: each a little to one side of the worker counts
    xs = [tuple(line.get_xdata()) for line in au.axes[0].get_lines()[:16]]
    assert len({x for pts in xs for x in pts}) == 2 * 16
    assert all(abs(x - round(x)) < 0.4 for pts in xs for x in pts)
