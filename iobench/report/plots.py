"""The HTML report's figures, each an inline SVG string (or None when the run has nothing to plot).

matplotlib is imported inside the functions: the CLI must start without it. Figures are built on
``matplotlib.figure.Figure`` directly rather than through pyplot, so rendering needs no GUI backend
and never switches the backend of a notebook or program that calls ``write_html``. User strings
(tier names, cell ids) reach the SVG as matplotlib's escaped ``<text>``; math parsing is off, so
a ``$`` in a name is a dollar sign and never a mathtext error. Legends get their labels explicitly:
from artists' labels matplotlib drops any that starts with ``_``, as a cell id slugged from
``<tier>`` does.
"""

from __future__ import annotations

import functools
import io
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iobench.results.codec import to_json
from iobench.results.figures import PART_LABELS
from iobench.results.spec import CellSpec
from iobench.results.summary import CellSummary

from .measured import metrics_of

if TYPE_CHECKING:
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

# the wall split of docs/method.md, in the order a reader walks the pipeline
SPLIT_COLOURS = {
    "device": "#2e7d32",
    "host": "#a5d6a7",
    "loader_start": "#90caf9",
    "fetch": "#1565c0",
    "decode": "#ef6c00",
    "augment": "#f9a825",
    "collate": "#6a1b9a",
    "unsplit": "#8d6e63",
    "handover": "#ce93d8",
    "peer_wait": "#c62828",
    "h2d": "#546e7a",
    "allreduce": "#00838f",
    "checkpoint": "#ad1457",
    "loop": "#cfd8dc",
}
# a step in the order it runs: its own data wait, waiting for peers, copy, compute, all-reduce
_STEP_PARTS = (
    ("wait_s", "wait for data", "#c62828"),
    ("peer_wait_s", "wait for peers", "#ff8f00"),
    ("h2d_s", "host-to-device", "#546e7a"),
    ("compute_s", "compute", "#2e7d32"),
    ("allreduce_s", "all-reduce (modelled)", "#5e35b1"),
)
_RC = {
    "svg.fonttype": "none",  # real <text>: smaller, searchable, and escaped by matplotlib
    "svg.hashsalt": "iobench",  # the same run gives the same SVG
    "text.parse_math": False,
    "font.size": 9,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_TAG = re.compile(r"<[^>]*>")
_XMLNS = re.compile(r'\s+xmlns(:xlink)?="[^"]*"')
_ID_REF = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def _figure(height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(9, height), layout="constrained")


def _svg(fig: Figure, prefix: str) -> str:
    """The figure as an ``<svg>`` element for inlining in HTML.

    The XML prologue and DOCTYPE go (the DOCTYPE names an external DTD), so do the namespace
    declarations, which HTML's parser supplies, and every id gets ``prefix``: matplotlib numbers
    ids per figure (``axes_1``...), so two inlined figures would otherwise share ids and clip paths.
    """
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    text = buf.getvalue()

    def retag(tag: re.Match) -> str:
        out = _XMLNS.sub("", tag.group(0)).replace("xlink:href=", "href=")
        return _ID_REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", out)

    # only inside tags: text is escaped (no raw < or >), so a name that looks like an id stays as typed
    return _TAG.sub(retag, text[text.index("<svg") :])


def _ok(summaries: list[CellSummary]) -> list[CellSummary]:
    """The measured cells, grouped by tier: the order of every figure's bars and legend."""
    return sorted(
        (s for s in summaries if s.ok and s.metrics is not None), key=lambda s: (s.cell.tier_name, s.cell_id)
    )


# a loader setup's marker and a worker count's line style: a run of at most 9 setups and 6 worker
# counts draws every cell of a tier differently, and at most 20 tiers keep their colours apart
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_LINESTYLES: tuple[Any, ...] = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 1)))


@dataclass(frozen=True)
class CellStyle:
    """How every figure draws one cell: its tier's colour, its loader setup's marker (the loader
    and everything else about the cell but its tier and workers: cache state, layout, batch...) and
    its worker count's line style."""

    colour: str
    marker: str
    linestyle: Any  # a matplotlib line style: a name or an (offset, dashes) pair

    def line(self) -> dict[str, Any]:
        """Keyword arguments that draw a line (or a marker) in this style."""
        return {
            "color": self.colour,
            "marker": self.marker,
            "ls": self.linestyle,
            "ms": 5,
            "mec": "black",
            "mew": 0.5,
        }


def _setup(cell: CellSpec) -> str:
    """The cell less its id, tier and workers: two cells of a tier and worker count differ in it."""
    spec = to_json(cell)
    del spec["cell_id"], spec["tier"], spec["loader"]["workers"]
    return json.dumps(spec, sort_keys=True)


def cell_styles(summaries: list[CellSummary]) -> dict[str, CellStyle]:
    """Each measured cell's style, by cell id, in the figures' order: tiers take tab10's colours,
    tab20's past ten tiers; the same setup or worker count has the same marker or line style in
    every tier."""
    require_matplotlib()
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cells = [s.cell for s in _ok(summaries)]
    tiers = list(dict.fromkeys(c.tier_name for c in cells))
    # the registry types each entry as a Colormap, and a ListedColormap's colours as any array-like:
    # tab10 and tab20 are ListedColormaps, their colours a tuple of RGB tuples
    cmap = cast("ListedColormap", colormaps["tab10" if len(tiers) <= 10 else "tab20"])
    palette = cast("tuple[tuple[float, float, float], ...]", cmap.colors)
    colour = {t: to_hex(palette[i % len(palette)]) for i, t in enumerate(tiers)}
    setups = {k: i for i, k in enumerate(dict.fromkeys(_setup(c) for c in cells))}
    workers = {w: i for i, w in enumerate(sorted({c.loader.workers for c in cells}))}
    return {
        c.cell_id: CellStyle(
            colour[c.tier_name],
            _MARKERS[setups[_setup(c)] % len(_MARKERS)],
            _LINESTYLES[workers[c.loader.workers] % len(_LINESTYLES)],
        )
        for c in cells
    }


HTML_HINT = "pip install 'iobench[html]'"


def require_matplotlib() -> None:
    """ImportError with the install hint when matplotlib (the ``html`` extra) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"the HTML report's figures need matplotlib: {HTML_HINT} ({exc})") from exc


def _in_rc(draw):
    """Run a figure builder under the report's rcParams (fonts, spines) without touching the caller's."""

    @functools.wraps(draw)
    def wrapped(*args, **kwargs):
        require_matplotlib()
        import matplotlib

        with matplotlib.rc_context(_RC):
            return draw(*args, **kwargs)

    return wrapped


def _keyed_rows(fig: Figure, cells: list[CellSummary], styles: dict[str, CellStyle], labels: list[str]):
    """Axes for one horizontal bar per cell, top to bottom, and their y positions. Each row is labelled
    and keyed: left of the bars, a short line in the cell's style, as the line figures draw it."""
    key, ax = fig.subplots(1, 2, sharey=True, width_ratios=[1.5, 16])
    y = np.arange(len(cells))[::-1]
    for yi, s in zip(y, cells, strict=True):
        key.plot([0.0, 0.5, 1.0], [yi, yi, yi], markevery=[1], **styles[s.cell_id].line())
    key.set_xlim(-0.1, 1.1)
    key.set_xticks([])
    key.spines[["left", "bottom"]].set_visible(False)
    key.set_yticks(y, labels)
    key.tick_params(left=False)
    ax.tick_params(left=False, labelleft=False)
    return ax, y


@_in_rc
def throughput_svg(summaries: list[CellSummary], styles: dict[str, CellStyle], prefix: str) -> str | None:
    """Samples/s per cell, one bar each, coloured by tier; the 95 % interval where repeats gave one."""
    cells = _ok(summaries)
    if not cells:
        return None
    fig = _figure(1.2 + 0.32 * len(cells))
    ax, y = _keyed_rows(fig, cells, styles, [s.cell_id for s in cells])
    values = [metrics_of(s).samples_per_s for s in cells]
    ax.barh(y, values, color=[styles[s.cell_id].colour for s in cells])
    for yi, s in zip(y, cells, strict=True):
        sps = s.stability.samples_per_s if s.stability else None
        if sps is not None and sps.ci_low is not None and sps.ci_high is not None:
            ax.plot([max(0.0, sps.ci_low), sps.ci_high], [yi, yi], color="black", lw=1)
            ax.plot([sps.mean], [yi], "k|", ms=8)
    ax.set_xlabel("samples/s (measured steps)")
    ax.set_title("Throughput by tier and loader")
    tiers = {s.cell.tier_name: styles[s.cell_id].colour for s in cells}
    fig.legend([_patch(c) for c in tiers.values()], list(tiers), title="tier", loc="outside right upper")
    return _svg(fig, prefix)


def _patch(colour: str):
    from matplotlib.patches import Patch

    return Patch(color=colour)


@_in_rc
def attribution_svg(summaries: list[CellSummary], styles: dict[str, CellStyle], prefix: str) -> str | None:
    """One stacked bar per cell: the fraction of wall time the accelerator computed, and where the rest went."""
    with_split = [(s, split) for s in _ok(summaries) if (split := s.split) is not None]
    if not with_split:
        return None
    cells = [s for s, _ in with_split]
    fig = _figure(1.6 + 0.32 * len(cells))
    splits = [split.parts() for _, split in with_split]
    ax, y = _keyed_rows(fig, cells, styles, [s.cell_id for s in cells])
    left = np.zeros(len(cells))
    for key, colour in SPLIT_COLOURS.items():
        widths = np.array([max(0.0, split[key]) for split in splits])
        if widths.any():
            ax.barh(y, widths, left=left, color=colour, label=PART_LABELS[key])
            left += widths
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(_percent())
    ax.set_xlabel("share of wall time")
    ax.set_title("Where the wall time went")
    fig.legend(loc="outside lower center", ncol=4)
    return _svg(fig, prefix)


def _plain():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: f"{value:g}")


def _percent():
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0, decimals=0)


# what may vary between the cells of a run besides tier, loader and workers; each becomes part of
# a line's label when it does
_VARYING = {
    "layout": lambda c: c.loader.layout,
    "batch": lambda c: f"b{c.loader.batch_size}",
    "accelerator": lambda c: c.accelerator.label,
    "cache": lambda c: c.cache,
}


def _series_label(cell: CellSpec, varying: set[str]) -> str:
    parts = [cell.tier_name, cell.loader.kind]
    return " / ".join(parts + [str(read(cell)) for k, read in _VARYING.items() if k in varying])


def _dodge(n: int, step: float) -> np.ndarray:
    """x offsets, centred on 0, that set ``n`` series ``step`` apart (closer when there are more than
    16, so that they span at most 15 steps): series with equal values all stay visible."""
    return (np.arange(n) - (n - 1) / 2) * min(step, 15 * step / max(n - 1, 1))


def _lines_legend(fig: Figure, handles: list, labels: list[str]) -> None:
    """A legend that names every line, its handles long enough to show their line styles."""
    fig.legend(handles, labels, loc="outside right upper", handlelength=3.2)


def _lines_figure(series: int) -> Figure:
    """A figure tall enough for a legend of ``series`` lines beside it."""
    return _figure(max(3.6, 1.0 + 0.19 * series))


class _FractionAxes(NamedTuple):
    """What a plot whose y axis is a fraction says on its axes, and how far up the axis goes."""

    x: str
    y: str
    title: str
    top: float = 1.05


def _fraction_plot(
    fig: Figure, ax, handles: list, labels: list[str], axes: _FractionAxes, prefix: str
) -> str:
    """A line plot whose y axis is a fraction (0 to ``axes.top``, in percent) finished: its axes
    named, a legend naming every line, the SVG."""
    ax.set_ylim(0, axes.top)
    ax.yaxis.set_major_formatter(_percent())
    ax.set(xlabel=axes.x, ylabel=axes.y, title=axes.title)
    _lines_legend(fig, handles, labels)
    return _svg(fig, prefix)


_AU_AXES = _FractionAxes("loader workers", "AU", "Accelerator utilisation against loader workers")


@_in_rc
def au_workers_svg(summaries: list[CellSummary], styles: dict[str, CellStyle], prefix: str) -> str | None:
    """AU against loader workers, one line per tier/loader (and whatever else varies in the run), in
    its cells' colour and marker; workers being the x axis, the lines are solid."""
    cells = _ok(summaries)
    if not cells:
        return None
    varying = {k for k, read in _VARYING.items() if len({read(s.cell) for s in cells}) > 1}
    lines: dict[tuple[str, str], list[CellSummary]] = defaultdict(list)
    for s in cells:
        lines[(s.cell.tier_name, _setup(s.cell))].append(s)
    workers = sorted({s.cell.loader.workers for s in cells})
    fig = _lines_figure(len(lines))
    ax = fig.add_subplot()
    handles = []
    gap = min(np.diff(workers), default=1)  # between neighbouring worker counts
    offsets = _dodge(len(lines), 0.04 * gap)
    for dx, line in zip(offsets, lines.values(), strict=True):
        line.sort(key=lambda s: s.cell.loader.workers)
        style = styles[line[0].cell_id].line() | {"ls": "-"}
        au = [metrics_of(s).au for s in line]
        handles += ax.plot([s.cell.loader.workers + dx for s in line], au, **style)
    ax.axhline(0.9, color="grey", ls="--", lw=1)
    ax.annotate(
        "90 %: accelerator-bound (MLPerf Storage rule)", (0.01, 0.91), xycoords=("axes fraction", "data")
    )
    ax.set_xticks(workers)
    ax.set_xlim(workers[0] - gap / 2, workers[-1] + gap / 2)
    labels = [_series_label(line[0].cell, varying) for line in lines.values()]
    return _fraction_plot(fig, ax, handles, labels, _AU_AXES, prefix)


_WAIT_AXES = _FractionAxes(
    x="wait per step, ms (linear below 1 ms, log above)",
    y="steps with at most this wait",
    title="Wait-time distribution (measured steps)",
    top=1.02,
)


@_in_rc
def wait_cdf_svg(steps: dict[str, pa.Table], styles: dict[str, CellStyle], prefix: str) -> str | None:
    """The distribution of the per-step wait, measured steps only, as one CDF per cell."""
    series = {}
    for cell_id in (c for c in styles if c in steps):  # the figures' order
        table = steps[cell_id]
        measured = table.filter(pc.invert(table.column("warmup")))
        if measured.num_rows:
            series[cell_id] = np.sort(measured.column("wait_s").to_numpy() * 1e3)
    if not series:
        return None
    fig = _lines_figure(len(series))
    ax = fig.add_subplot()
    handles = [
        # markers a tenth of the plot apart, each curve's a little further along, so equal curves show
        ax.step(
            w,
            np.arange(1, len(w) + 1) / len(w),
            where="post",
            markevery=(0.015 * (i % 6), 0.1),
            **styles[c].line(),
        )[0]
        for i, (c, w) in enumerate(series.items())
    ]
    # linear below 1 ms, logarithmic above: zero waits and half-second stalls on one axis
    ax.set_xscale("symlog", linthresh=1.0)
    ax.xaxis.set_major_formatter(_plain())  # the default writes mathtext, which is off
    ax.set_xlim(left=0)
    return _fraction_plot(fig, ax, handles, list(series), _WAIT_AXES, prefix)


@_in_rc
def timeline_svg(steps: pa.Table, prefix: str) -> str | None:
    """Every step of one cell against time, warm-up shaded: its wait for data, for its peers (a
    synchronous cell), host-to-device, compute and the modelled all-reduce."""
    if steps.num_rows == 0:
        return None
    names = ("t_start", "t_end", *(key for key, _, _ in _STEP_PARTS))
    cols = {k: steps.column(k).to_numpy() for k in names if k in steps.column_names}  # v3: no peer wait
    warmup = steps.column("warmup").to_numpy(zero_copy_only=False)
    epoch = steps.column("epoch").to_numpy()
    t0 = cols["t_start"][0]
    # one polygon per component, a step function over each step's start: compact however many steps
    x = np.append(cols["t_start"], cols["t_end"][-1]) - t0
    fig = _figure(3.2)
    ax = fig.add_subplot()
    base = np.zeros(len(x))
    for key, label, colour in _STEP_PARTS:
        if key not in cols or (key in ("peer_wait_s", "allreduce_s") and not cols[key].any()):
            continue
        top = base + np.append(cols[key], cols[key][-1]) * 1e3
        ax.fill_between(x, base, top, step="post", color=colour, label=label, lw=0)
        base = top
    if warmup.any():
        last = int(np.flatnonzero(warmup)[-1])
        ax.axvspan(0, cols["t_end"][last] - t0, color="grey", alpha=0.25, lw=0, label="warm-up (left out)")
    for i in np.flatnonzero(np.diff(epoch)) + 1:
        ax.axvline(cols["t_start"][i] - t0, color="black", ls=":", lw=1)
    ax.set_xlim(0, x[-1])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since the first step started (dotted: epoch boundary)")
    ax.set_ylabel("ms per step")
    ax.set_title("Step timeline")
    fig.legend(loc="outside right upper")
    return _svg(fig, prefix)


_CACHE_HIT_AXES = _FractionAxes(
    x="epoch (each cell's points a little to one side, so equal ratios all show)",
    y="cache hit ratio",
    title="Shard-cache hit ratio per epoch",
)


@_in_rc
def cache_hit_svg(summaries: list[CellSummary], styles: dict[str, CellStyle], prefix: str) -> str | None:
    """Shard-cache hit ratio per epoch, one line per cell that has a cache, each a little to the
    side of its epoch so that cells with equal ratios all show."""
    series = {}
    for s in _ok(summaries):
        points = [(e.epoch + 1, e.cache_hit_ratio) for e in s.epochs if e.cache_hit_ratio is not None]
        if points:
            series[s.cell_id] = points
    if not series:
        return None
    fig = _lines_figure(len(series))
    ax = fig.add_subplot()
    handles = [
        ax.plot([p[0] + dx for p in pts], [p[1] for p in pts], **styles[c].line())[0]
        for dx, (c, pts) in zip(_dodge(len(series), 0.04), series.items(), strict=True)
    ]
    ax.set_xticks(sorted({p[0] for points in series.values() for p in points}))
    return _fraction_plot(fig, ax, handles, list(series), _CACHE_HIT_AXES, prefix)
