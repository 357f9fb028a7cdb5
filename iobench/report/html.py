"""The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched) per run.

The page is a Jinja2 template (templates/report.html.j2) rendered with autoescape on, so every
string from the user or the run (cell ids, tier names, paths, errors, evidence) reaches the page as
text without a call to remember. The figures' SVG is matplotlib's, which escapes its own text; it
is the only thing marked safe.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..analysis.scale import checks
from ..host.atomic import atomic_write
from ..host.units import format_bytes, format_percent
from ..results.api import load_steps, load_summaries
from ..results.store import STEPS_NAME, read_manifest
from ..results.summary import CellSummary
from . import plots
from .bottomline import bottom_line
from .checkpoints import checkpoint_rows, checkpoint_verdicts
from .measured import metrics_of
from .mlperf import decoding_adds
from .terminal import (
    at_scale_line,
    cache_lines,
    cores_line,
    diagnosis_lines,
    outage_line,
    reading_line,
    window_cell,
)

REPORT_NAME = "report.html"

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #212121; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-bottom: .3em; }
#bottom-line { background: #f1f8e9; border-left: 4px solid #558b2f; padding: .2em 1em .6em; }
#bottom-line h2 { margin-top: .4em; border: none; } details summary { cursor: pointer; color: #455a64; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #e0e0e0; text-align: right; vertical-align: top; }
th { background: #f5f5f5; } td.l, th.l { text-align: left; }
.failed { color: #b71c1c; font-weight: 600; } .warn { color: #e65100; } .ok { color: #1b5e20; }
.note { color: #555; font-style: italic; }
figure { margin: 1em 0; } figure svg { width: 100%; max-width: 1050px; height: auto; }
figcaption { color: #444; max-width: 900px; }
.cell { border-left: 4px solid #90a4ae; padding: .2em 1em; margin: 1.2em 0; }
.cell.is-failed { border-color: #b71c1c; }
.headline { font-weight: 600; } code { background: #f5f5f5; padding: 0 3px; }
"""
NO_CACHE = (
    "no cache in this run: no cell read through a shard cache (a tier with cache_dir or memory_cache), "
    "so there is no per-epoch hit ratio to plot."
)


def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("iobench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt field is an error, not an empty cell
        keep_trailing_newline=True,
    )
    env.filters.update(
        pct=format_percent,
        bytes=format_bytes,
        tojson_sorted=lambda value: json.dumps(value, sort_keys=True),
    )
    env.globals.update(
        diagnosis=diagnosis_lines,
        at_scale=at_scale_line,
        outage=outage_line,
        cache_lines=cache_lines,
        window_cell=window_cell,
        reading=reading_line,
        cores=cores_line,
        decoding_adds=decoding_adds,
    )
    return env


def write_html(run_dir: Path, out: Path | None = None) -> Path:
    """Write the run's HTML report to ``out`` (default ``RUN_DIR/report.html``) and return its path."""
    plots.require_matplotlib()  # before anything is read or written
    run_dir = Path(run_dir)
    summaries = load_summaries(run_dir)
    steps = {
        s.cell_id: load_steps(run_dir, s.cell_id)
        for s in summaries
        if s.ok and (run_dir / s.cell_id / STEPS_NAME).exists()
    }
    page = render_html(summaries, steps, title=str(run_dir.absolute()), host=_host(run_dir, summaries))
    out = Path(out) if out is not None else run_dir / REPORT_NAME
    with atomic_write(out, "w") as f:
        f.write(page)
    return out


def _host(run_dir: Path, summaries: list[CellSummary]) -> str:
    """The host as the first measured cell's manifest describes it (failed cells have none)."""
    for s in summaries:
        manifest = read_manifest(run_dir, s.cell_id)
        if manifest is not None:
            h = manifest.host
            return f"; host {h.hostname}, {h.usable_cpus} usable CPU(s), {h.cpu_model}"
    return ""


def timeline_of(with_steps: list[CellSummary]) -> tuple[CellSummary, int | None] | None:
    """The cell (and rank) whose step timeline tells most: a synchronous multi-rank cell's rank
    that waited longest for its peers, where there is one; else the slowest cell (in a
    free-running multi-rank cell, its slowest rank)."""
    in_step = [
        (s, d) for s in with_steps if (d := s.distributed) is not None and d.sync != "none" and s.ranks
    ]
    if in_step:
        cell, _ = max(in_step, key=lambda sd: sd[1].peer_wait_fraction)
        return cell, max(cell.ranks, key=lambda r: r.peer_wait_s).rank
    slowest = min(with_steps, key=lambda s: metrics_of(s).samples_per_s, default=None)
    if slowest is None:
        return None
    return slowest, slowest.distributed.slowest_rank if slowest.distributed else None


def one_rank(steps: pa.Table, rank: int | None) -> pa.Table:
    """A multi-rank cell's steps interleave every rank's: keep one rank's."""
    if rank is None or "rank" not in steps.column_names:
        return steps
    return steps.filter(pc.equal(steps.column("rank"), rank))


def render_html(summaries: list[CellSummary], steps: dict[str, pa.Table], title: str, host: str = "") -> str:
    """The report page for ``summaries`` and their cells' step tables."""
    from markupsafe import Markup

    ok = [s for s in summaries if s.ok and s.metrics is not None]
    with_steps = [s for s in ok if s.cell_id in steps]
    shown = timeline_of(with_steps)

    def svg(text: str | None) -> Markup | None:
        return Markup(text) if text is not None else None

    styles = plots.cell_styles(summaries)  # one cell, one look, in every figure
    figures = {
        "throughput": svg(plots.throughput_svg(summaries, styles, "throughput")),
        "attribution": svg(plots.attribution_svg(summaries, styles, "attribution")),
        "au_workers": svg(plots.au_workers_svg(summaries, styles, "au-workers")),
        "wait": svg(plots.wait_cdf_svg(steps, styles, "wait")),
        "timeline": svg(
            plots.timeline_svg(one_rank(steps[shown[0].cell_id], shown[1]), "timeline") if shown else None
        ),
        "cache_hit": svg(plots.cache_hit_svg(summaries, styles, "cache-hit")),
    }
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            host=host,
            css=Markup(_CSS),
            summaries=summaries,
            failed=sum(not s.ok for s in summaries),
            figures=figures,
            timeline=shown,
            no_cache=NO_CACHE,
            scaling=checks(summaries),
            bottom=bottom_line(summaries),
            checkpoints=checkpoint_rows(summaries),
            checkpoint_verdicts=checkpoint_verdicts(summaries),
        )
    )
