"""The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched) per run.

Every string that came from the user or the run (cell ids, tier names, paths, errors, evidence)
goes through ``_e`` (html.escape) before it reaches the page; the figures' SVG is matplotlib's,
which escapes its own text.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from iobench.host.atomic import atomic_write
from iobench.host.units import format_bytes

from ..results.api import load_run, load_steps
from ..results.store import cell_summaries
from . import plots
from .terminal import LOST_ORDER

REPORT_NAME = "report.html"

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1250px; color: #212121; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-bottom: .3em; }
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


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def write_html(run_dir: Path, out: Path | None = None) -> Path:
    """Write the run's HTML report to ``out`` (default ``RUN_DIR/report.html``) and return its path."""
    run_dir = Path(run_dir)
    summaries = _ordered_summaries(run_dir)
    steps = {}
    for s in summaries:
        cell_id = s["cell"]["cell_id"]
        if s.get("status") == "ok" and (run_dir / cell_id / "steps.parquet").exists():
            steps[cell_id] = load_steps(run_dir, cell_id)
    page = render_html(summaries, steps, title=str(run_dir.absolute()), host=_host(run_dir, summaries))
    out = Path(out) if out is not None else run_dir / REPORT_NAME
    with atomic_write(out, "w") as f:
        f.write(page)
    return out


def _ordered_summaries(run_dir: Path) -> list[dict]:
    """The cells' summaries in the sweep's order (results.parquet's rows), by id where there is no table."""
    summaries = cell_summaries(run_dir)
    if not summaries:
        raise FileNotFoundError(f"{run_dir}: no cell results found (is it an iobench run directory?)")
    order = load_run(run_dir).column("cell_id").to_pylist()
    rank = {cid: i for i, cid in enumerate(order)}
    return sorted(summaries, key=lambda s: rank.get(s["cell"]["cell_id"], len(rank)))


def render_html(summaries: list[dict], steps: dict[str, pa.Table], title: str, host: str = "") -> str:
    """The report page for ``summaries`` (summary.json dicts) and their cells' step tables."""
    failed = sum(s.get("status") != "ok" for s in summaries)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>iobench report: {_e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>iobench report: <code>{_e(title)}</code></h1>",
        f"<p>{len(summaries)} cell(s), {len(summaries) - failed} ok, {failed} failed or interrupted{_e(host)}. "
        "Every number is defined in docs/method.md; docs/reading-a-report.md walks through this page.</p>",
        '<h2 id="summary">Cells</h2>',
        _summary_table(summaries),
        '<h2 id="plots">Figures</h2>',
        *_figures(summaries, steps),
        '<h2 id="cells">Each cell in words</h2>',
        *(_cell_words(s) for s in summaries),
        "</body></html>",
    ]
    return "\n".join(parts)


def _host(run_dir: Path, summaries: list[dict]) -> str:
    """The host as the first cell's manifest describes it (failed cells have no manifest)."""
    for s in summaries:
        path = run_dir / s["cell"]["cell_id"] / "manifest.json"
        if path.exists():
            host = json.loads(path.read_text()).get("host") or {}
            return f"; host {host.get('hostname')}, {host.get('usable_cpus')} usable CPU(s), {host.get('cpu_model')}"
    return ""


def _summary_table(summaries: list[dict]) -> str:
    head = (
        '<table id="summary-table"><tr><th class="l">cell</th><th class="l">tier</th><th class="l">loader</th>'
        '<th class="l">accelerator</th><th class="l">cache (resident before)</th><th>samples/s</th>'
        "<th>read/s</th><th>AU</th><th>stall</th><th>wait p50</th><th>wait p99</th>"
        '<th>warm-up</th><th class="l">verdict</th></tr>'
    )
    rows = [head]
    for s in summaries:
        cell = s["cell"]
        loader = cell.get("loader") or {}
        lead = (
            f'<td class="l"><a href="#cell-{_e(cell["cell_id"])}">{_e(cell["cell_id"])}</a></td>'
            f'<td class="l">{_e(cell["tier"].get("name"))} ({_e(cell["tier"].get("kind"))})</td>'
            f'<td class="l">{_e(loader.get("kind"))}, {_e(loader.get("workers"))} worker(s), '
            f"batch {_e(loader.get('batch_size'))}</td>"
            f'<td class="l">{_e(plots.accelerator_label(cell))}</td>'
        )
        if s.get("status") != "ok":
            rows.append(
                f'<tr class="failed-row">{lead}<td class="l failed" colspan="9">'
                f"{_e(s.get('status'))}: {_e(s.get('error'))}</td></tr>"
            )
            continue
        m, c = s["metrics"], s.get("cache_state") or {}
        rows.append(
            f"<tr>{lead}"
            f'<td class="l">{_e(c.get("requested"))} &rarr; {_e(c.get("achieved"))} '
            f"({_pct(c.get('resident_fraction_before'))})</td>"
            f"<td>{_throughput(s)}</td><td>{_e(format_bytes(m['bytes_per_s']))}/s</td>"
            f"<td>{m['au']:.2f}</td><td>{_pct(m['stall_fraction'])}</td>"
            f"<td>{m['wait_p50_ms']:.1f} ms</td><td>{m['wait_p99_ms']:.1f} ms</td>"
            f"<td>{_e((s.get('warmup') or {}).get('steps', '-'))}</td>"
            f'<td class="l">{_e(_verdict_name(s))}</td></tr>'
        )
    return "\n".join([*rows, "</table>"])


def _throughput(s: dict) -> str:
    text = f"{s['metrics']['samples_per_s']:,.0f}"
    sps = (s.get("stability") or {}).get("samples_per_s") or {}
    if sps.get("ci_low") is not None:
        text += f"<br><small>CI {sps['ci_low']:,.0f}&ndash;{sps['ci_high']:,.0f}, {sps['n']} runs</small>"
    if _unstable(s):
        text += '<br><small class="warn">UNSTABLE</small>'
    return text


def _unstable(s: dict) -> bool:
    stability = s.get("stability") or {}
    return any((stability.get(k) or {}).get("unstable") for k in ("samples_per_s", "au"))


def _verdict_name(s: dict) -> str:
    v = s.get("verdict") or {}
    return f"{v.get('bound')}-bound" + (f" ({v['binding_stage']})" if v.get("binding_stage") else "")


def _figure(plot_id: str, svg: str | None, caption: str, empty: str) -> str:
    if svg is None:
        return f'<p class="note" id="{plot_id}">{empty}</p>'
    return f'<figure id="{plot_id}">{svg}<figcaption>{caption}</figcaption></figure>'


def _one_rank(steps: pa.Table, summary: dict) -> pa.Table:
    """A multi-rank cell's steps interleave every rank's: keep its slowest rank's."""
    rank = (summary.get("distributed") or {}).get("slowest_rank")
    if rank is None or "rank" not in steps.column_names:
        return steps
    return steps.filter(pc.equal(steps.column("rank"), rank))


def _figures(summaries: list[dict], steps: dict[str, pa.Table]) -> list[str]:
    sources = {plots.wall_split(s)[1] for s in summaries if s.get("status") == "ok" and s.get("metrics")}
    ok_with_steps = [s for s in summaries if s["cell"]["cell_id"] in steps and s.get("metrics")]
    slowest = min(ok_with_steps, key=lambda s: s["metrics"]["samples_per_s"], default=None)
    no_ok = "no cell finished, so there is nothing to plot."
    return [
        _figure(
            "plot-throughput",
            plots.throughput_svg(summaries, "throughput"),
            "Samples/s over the measured steps, one bar per cell, coloured by tier. A black line is the "
            "95 % confidence interval of the mean over repeats (tick: the mean); the bar is the median run.",
            no_ok,
        ),
        _figure(
            "plot-attribution",
            plots.attribution_svg(summaries, "attribution"),
            "How each cell's wall time divides: the accelerator computing (its AU) and the time lost to each "
            "stage. Cells marked <em>(differential)</em> use the split of the differential attribution "
            "(<code>run.diagnose</code>), which books batches finished but not yet delivered to collate/IPC; "
            "cells marked <em>(stage timers)</em> had no diagnosis, so their stall fraction is split in "
            "proportion to the per-sample stage times of the online timers. "
            f"In this run: {_e(', '.join(sorted(sources)) or 'none')}.",
            no_ok,
        ),
        _figure(
            "plot-au-workers",
            plots.au_workers_svg(summaries, "au-workers"),
            "Accelerator utilisation against loader workers, one line per tier and loader. A line that rises "
            "with workers is CPU-bound (more readers help); a flat one is bound elsewhere (storage, accelerator).",
            no_ok,
        ),
        _figure(
            "plot-wait",
            plots.wait_cdf_svg(steps, "wait"),
            "For each cell, the share of measured steps (warm-up left out) whose wait for the next batch was at "
            "most the value on the x axis. A curve hugging the left edge never starves the accelerator; a long "
            "tail to the right is the p99 in the table.",
            "no cell recorded measured steps.",
        ),
        _figure(
            "plot-timeline",
            plots.timeline_svg(_one_rank(steps[slowest["cell"]["cell_id"]], slowest), "timeline")
            if slowest
            else None,
            f"Every step of the slowest cell, <code>{_e(slowest['cell']['cell_id']) if slowest else ''}</code> "
            "(lowest samples/s; in a multi-rank cell, its slowest rank): how long it waited for its batch "
            "(red), copied it to the device and computed. The shaded span is warm-up, left out of every metric.",
            "no cell recorded steps.",
        ),
        _figure(
            "plot-cache-hit",
            plots.cache_hit_svg(summaries, "cache-hit"),
            "Shard-cache hits / lookups per epoch (warm-up included, since a cache fills over an epoch). A cache "
            "that holds the dataset goes from near 0 in epoch 1 to near 100 % after; one smaller than the "
            "dataset, read in shuffled epochs, stays low (LRU thrash).",
            "no cache in this run: no cell read through a shard cache (a tier with <code>cache_dir</code> "
            "or <code>memory_cache</code>), so there is no per-epoch hit ratio to plot.",
        ),
    ]


def _cell_words(s: dict) -> str:
    cell = s["cell"]
    cid = _e(cell["cell_id"])
    if s.get("status") != "ok":
        return (
            f'<section class="cell is-failed" id="cell-{cid}"><h3>{cid}</h3>'
            f'<p class="failed">{_e(s.get("status"))}: {_e(s.get("error"))}</p>'
            f"<p>tier <code>{_e(json.dumps(cell.get('tier'), sort_keys=True))}</code></p></section>"
        )
    v = s["verdict"]
    items = [f"<li>{_e(line)}</li>" for line in v.get("evidence") or []]
    items += [f"<li>{text}</li>" for text in _diagnosis(s)]
    items += [f'<li class="warn">note: {_e(w)}</li>' for w in s.get("warnings") or []]
    note = (s.get("cache_state") or {}).get("note")
    if note:
        items.append(f"<li>cache: {_e(note)}</li>")
    return (
        f'<section class="cell" id="cell-{cid}"><h3>{cid}</h3>'
        f'<p class="headline">{_e(v["headline"])}</p><ul>{"".join(items)}</ul>{_epochs(s)}</section>'
    )


def _interval(stats: dict, fmt: str) -> str:
    """A repeated metric's interval; only called for n > 1, which always has one."""
    return (
        f"mean {fmt.format(stats['mean'])}, 95 % CI {fmt.format(stats['ci_low'])} to "
        f"{fmt.format(stats['ci_high'])} over {stats['n']} runs, spread {100 * stats['spread']:.1f} %"
    )


def _diagnosis(s: dict) -> list[str]:
    """Warm-up, repeats, the differential statement, the capacity answer and what epoch 1 cost, as
    escaped HTML items (the terminal report's lines, in the same order)."""
    out = []
    warm = s.get("warmup")
    if warm:
        out.append(_e(f"warm-up: {warm['steps']} step(s) left out ({warm['method']})"))
    stability = s.get("stability")
    if stability and stability["samples_per_s"]["n"] > 1:
        sps, au = stability["samples_per_s"], stability["au"]
        text = _e(f"repeats: samples/s {_interval(sps, '{:,.0f}')}; AU {_interval(au, '{:.2f}')}")
        if _unstable(s):
            text += ' <span class="warn">UNSTABLE: the runs disagree by more than 5 %</span>'
        out.append(text)
    a = s.get("attribution")
    if a:
        lost = a["lost_fraction"]
        out += [
            _e(a["statement"]),
            _e(
                f"measured {a['measured_samples_per_s']:,.0f}/s against the predicted "
                f"{a['predicted_samples_per_s']:,.0f}/s ({100 * a['prediction_error']:+.0f} %)"
            ),
            _e(
                f"of the wall time, the accelerator computed {_pct(a['au'])}; lost to "
                + ", ".join(f"{k} {100 * lost[k]:.1f} %" for k in LOST_ORDER if k in lost)
            ),
        ]
        if a.get("capacity"):
            out.append(_capacity(a["capacity"]))
    first = s.get("epoch1_vs_steady")
    if first is not None:
        out.append(
            _e(
                f"steady state vs the whole of epoch 1: {100 * first:+.0f} % "
                "(what start-up and cold caches cost the first epoch)"
            )
        )
    return out


def _capacity(cap: dict) -> str:
    n, each = cap["max_accelerators"], cap["demand_per_accelerator"]
    what = f"{cap['accelerator']} ({cap['model']}, {each:,.0f} samples/s each)"
    if n:
        answer = f"feeds at most {n} x {what} at >= 90 % AU"
    else:
        answer = f"cannot keep one {what} at 90 % AU: it feeds {cap['input_ceiling_samples_per_s'] / each:.0%} of one"
    checks = "; ".join(f"x{c['count']}: AU {c['au']:.2f}" for c in cap["checks"])
    verdict = (
        '<span class="ok">confirmed</span>' if cap["confirmed"] else '<span class="warn">NOT confirmed</span>'
    )
    return _e(f"capacity: this tier + loader {answer}; checked by running it ({checks}): ") + verdict


def _epochs(s: dict) -> str:
    epochs = s.get("epochs") or []
    if len(epochs) < 2 and not any(e.get("requests") or e.get("cache_hit_ratio") is not None for e in epochs):
        return ""
    rows = [
        "<table><tr><th>epoch</th><th>samples/s</th><th>stall</th><th>cache hits</th>"
        "<th>evictions</th><th>requests (retried)</th></tr>"
    ]
    for e in epochs:
        hits = "-"
        if e.get("cache_hit_ratio") is not None:
            hits = f"{e['cache_hits']:.0f}/{e['cache_hits'] + e['cache_misses']:.0f} ({_pct(e['cache_hit_ratio'])})"
        requests = f"{e['requests']:.0f} ({e['retries']:.0f})" if e.get("requests") else "-"
        rows.append(
            f"<tr><td>{e['epoch'] + 1}</td><td>{e['samples_per_s']:,.0f}</td><td>{_pct(e['stall_fraction'])}</td>"
            f"<td>{hits}</td><td>{e.get('cache_evictions') or 0:.0f}</td><td>{requests}</td></tr>"
        )
    return "\n".join([*rows, "</table>"])
