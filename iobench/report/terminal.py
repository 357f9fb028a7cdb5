"""The terminal report: one row per cell, then each cell's verdict in words with its evidence (and,
for a multi-rank cell, every rank's figures)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from iobench.analysis import scale
from iobench.analysis.cores import describe_cores
from iobench.analysis.knee import knees
from iobench.analysis.mlperf import READING, reading_of
from iobench.host.units import format_bytes, format_percent
from iobench.report.bottomline import bottom_line
from iobench.report.mlperf import decoding_adds
from iobench.report.tables import Columns
from iobench.results.figures import PART_LABELS, Capacity, RepeatSummary, Window
from iobench.results.summary import CellSummary
from loaders.observe import CacheHealthCounts, CacheStats


def _say(console: Console, line: str) -> None:
    """Plain text: figures, errors and names are never read as rich markup ('[/dev/sda]' in an
    error message would otherwise crash the report, and '[red]' in a tier name would style it)."""
    console.print(line, markup=False)


# each column's width: the table fits 100 columns, a long cell id wrapping whole inside its own
WIDTHS = {
    "cell": 18,
    "cache": 7,
    "samples/s": 9,
    "read/s": 10,
    "AU": 4,
    "stall": 5,
    "wait p99": 8,
    "window": 8,
    "verdict": 13,
}


def wrapped_id(cell_id: str, width: int = WIDTHS["cell"]) -> str:
    """A cell id in lines of at most ``width``, broken after its hyphens where it can be."""
    lines, line = [], ""
    for part in cell_id.replace("-", "-\0").split("\0"):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])


def results_table(summaries: list[CellSummary], title: str = "iobench sweep") -> Table:
    """One row per cell, readable at 100 columns: a long cell id wraps whole (folded, never cut)."""
    columns: Columns = (
        ("cell", "left"),
        ("cache", "left"),
        ("samples/s", "right"),
        ("read/s", "right"),
        ("AU", "right"),
        ("stall", "right"),
        ("wait p99", "right"),
        ("window", "right"),
        ("verdict", "left"),
    )
    table = Table(
        title=title,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        collapse_padding=True,
    )
    for col, justify in columns:
        table.add_column(col, justify=justify, overflow="fold", width=WIDTHS[col])
    for s in summaries:
        if not s.ok or s.metrics is None or s.verdict is None or s.cache_state is None:
            table.add_row(
                Text(wrapped_id(s.cell_id)),
                Text(s.cell.cache),
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                Text(s.status, "red"),
            )
            continue
        m, v, c = s.metrics, s.verdict, s.cache_state
        table.add_row(
            Text(wrapped_id(s.cell_id)),
            c.achieved,
            f"{m.samples_per_s:,.0f}",
            f"{format_bytes(m.bytes_per_s)}/s",
            f"{m.au:.2f}",
            format_percent(m.stall_fraction),
            f"{m.wait_p99_ms:.0f} ms",
            Text(
                window_cell(s.window),
                "" if s.window is None or (s.window.met and not s.window.cached) else "red",
            ),
            Text(v.bound + (f" ({v.binding_stage})" if v.binding_stage else "")),
        )
    return table


def reading_line(s: CellSummary) -> str:
    """How the cell read its samples, with the compute figure it slept when the table gives DLIO's."""
    line = READING[reading_of(s.cell)]
    if s.consumer.get("step_s"):
        line += f" ({s.consumer['step_s']:g} s per batch of {s.consumer['step_batch']})"
    return line


def window_cell(w: Window | None) -> str:
    """The measured window in a table cell: seconds, steps, and the samples/s interval."""
    if w is None:
        return "-"  # a run older than the window record
    ci = f" ±{100 * w.samples_per_s_rel_ci:.0f}%" if w.samples_per_s_rel_ci is not None else ""
    return f"{w.seconds:.1f}s/{w.steps}{ci}" + ("" if w.met else " SHORT") + (" CACHED" if w.cached else "")


def window_lines(s: CellSummary) -> list[tuple[str, str]]:
    """The measured window in words (diagnosis_lines' pairs), flagged when it fell short of
    run.min_measure."""
    w = s.window
    if w is None:
        return []
    least = s.cell.run.min_measure
    text = f"window: {w.steps} steps over {w.seconds:.2f} s after warm-up, {w.epochs} epoch(s)"
    if w.added_epochs:
        text += (
            f" ({w.added_epochs} added to reach run.min_measure: {least.steps} steps, {least.seconds:g} s)"
        )
    if w.samples_per_s_rel_ci is not None:
        text += f"; samples/s ±{100 * w.samples_per_s_rel_ci:.1f} % (95 %, batch means)"
    if not w.met:
        return [(text, ""), (f"SHORT of run.min_measure, stopped by {w.short_because}", "warn")]
    return [(text, "")]


def reads_line(s: CellSummary) -> str | None:
    """What the cell's processes read from storage, over the whole repeat and per second of the
    window, with their read calls and the host's reads of the tier's device beside it
    (docs/method.md, "Bytes read")."""
    total, rate = s.cell_device_read_bytes, s.device_read_bytes_per_s
    if total is None or rate is None:
        return None
    dataset = s.cache_state.total_bytes if s.cache_state else 0
    share = f" ({total / dataset:.2f}x the dataset)" if dataset else ""
    text = (
        f"reads: the cell's processes read {format_bytes(total)} from block devices in the whole run{share}, "
        f"{format_bytes(rate)}/s over the window"
    )
    if s.read_call_bytes_per_s is not None:
        text += f"; their read calls returned {format_bytes(s.read_call_bytes_per_s)}/s (caches, sockets included)"
    if s.host_device_read_bytes_per_s is not None and s.tier_device:
        text += (
            f"; {s.tier_device} delivered {format_bytes(s.host_device_read_bytes_per_s)}/s to the whole host"
        )
    return text


def print_report(
    summaries: list[CellSummary],
    console: Console | None = None,
    title: str = "iobench sweep",
    *,
    detail: bool = False,
) -> None:
    """The table, each cell in a few lines (``detail``: with every figure), the findings across
    cells, and the bottom line."""
    console = console or Console()
    console.print(results_table(summaries, title))
    common = common_warnings(summaries)
    for s in summaries:
        if detail:
            _print_cell_detail(s, console, common)
        else:
            _print_cell(s, console, common)
    if common:
        console.print(Text("\nnotes for every cell", "bold"))
        for w in common:
            _say(console, f"  - {w}")
    for line in decoding_adds(summaries):
        _say(console, f"\n{line}")
    found = knees(summaries)
    if found:
        console.print(Text("\nthe worker count that trains fastest", "bold"))
        for knee in found:
            for line in knee.lines():
                _say(console, f"  {line}")
    _print_checkpoints(summaries, console)
    lines = scaling_lines(summaries)
    if lines:
        console.print(
            Text("\nsynchronous scaling: each multi-rank cell against its one-rank twin's prediction", "bold")
        )
        for line in lines:
            _say(console, f"  {line}")
    bottom = bottom_line(summaries)
    if bottom:
        console.print(Text("\nbottom line", "bold"))
        for line in bottom:
            _say(console, f"  {line}")
    if not detail and any(s.ok for s in summaries):
        _say(console, "\n(every figure of every cell: iobench report RUN --detail, or --html)")


def _print_checkpoints(summaries: list[CellSummary], console: Console) -> None:
    from .checkpoints import checkpoint_table, checkpoint_verdicts

    table = checkpoint_table(summaries)
    if table is None:
        return
    console.print(table)
    for line in checkpoint_verdicts(summaries):
        _say(console, f"  {line}")


# evidence lines a cell shows by default; the rest, and its other figures, with --detail
KEY_EVIDENCE = 3


def common_warnings(summaries: list[CellSummary]) -> list[str]:
    """The notes every measured cell carries (said once, not per cell); none with a single cell."""
    ok = [s for s in summaries if s.ok]
    if len(ok) < 2:
        return []
    shared = set(ok[0].warnings).intersection(*(s.warnings for s in ok[1:]))
    return [w for w in ok[0].warnings if w in shared]


def _print_verdict(s: CellSummary, console: Console, evidence: int | None) -> bool:
    """The cell's id, its headline, its first ``evidence`` lines of evidence (all: None) and what to
    do; False for a cell that measured nothing (its error said instead)."""
    console.print(Text("\n" + s.cell_id, "bold"))
    if not s.ok or s.verdict is None:
        console.print(Text.assemble((f"  {s.status}: ", "red"), str(s.error)))
        return False
    v = s.verdict
    _say(console, f"  {v.headline}")
    shown = list(v.evidence if evidence is None else v.evidence[:evidence])
    if not s.cell.loader.decode:  # said first: its figures are not a decoding pipeline's
        shown = [reading_line(s), *(shown if evidence is None else shown[: evidence - 1])]
    for line in shown:
        _say(console, f"   - {line}")
    if v.action:
        console.print(Text.assemble("   ", ("do: ", "bold"), v.action))
    return True


def cores_line(s: CellSummary) -> str | None:
    """The cores per accelerator the judge computed, and where the window's cores went."""
    v = s.verdict
    if v is None or (v.cores is None and v.budget is None):
        return None
    parts = [describe_cores(v.cores)] if v.cores is not None else []
    if v.budget is not None:
        b = v.budget
        parts.append(
            f"the window's cores: the trainer {b.trainer:.1f}, the readers {b.readers:.1f}, iobench {b.own:.1f}, "
            f"other processes {b.others:.1f} of {b.usable}"
        )
    return "cores: " + "; ".join(parts)


def _print_cell(s: CellSummary, console: Console, common: list[str]) -> None:
    """One cell in at most eight lines: its verdict, its three strongest pieces of evidence, what to
    do, the cores it takes, a storage outage it rode through, and how many notes of its own --detail
    shows."""
    if not _print_verdict(s, console, KEY_EVIDENCE):
        return
    if line := cores_line(s):
        _say(console, f"   {line}")
    if line := outage_line(s):  # an outage inside the window moves every figure: said by default
        _say(console, f"   - {line}")
    for line in cache_lines(s):  # so does a cache read around, or one whose entries were damaged
        _say(console, f"   - {line}")
    own = [w for w in s.warnings if w not in common]
    if own:
        _say(console, f"   ({len(own)} note(s) on this cell: --detail)")


def _print_cell_detail(s: CellSummary, console: Console, common: list[str]) -> None:
    if not _print_verdict(s, console, None):
        return
    if len(s.epochs) > 1 or any(e.requests for e in s.epochs):
        epochs_shown = s.epochs if len(s.epochs) <= 6 else (*s.epochs[:3], *s.epochs[-2:])
        for e in epochs_shown:
            if len(epochs_shown) < len(s.epochs) and e is s.epochs[-2]:
                _say(
                    console,
                    f"   - ... {len(s.epochs) - len(epochs_shown)} more epochs (every one in the HTML report)",
                )
            # epochs are counted from 1 in every report (the HTML, the notes, the MLPerf view)
            line = f"epoch {e.epoch + 1}: {e.samples_per_s:,.0f} samples/s, stall {format_percent(e.stall_fraction)}"
            line += f", AU {e.au:.2f}" if e.au is not None else ""
            if e.cache_hit_ratio is not None:
                line += (
                    f", cache hits {e.cache_hits:.0f}/{e.cache_hits + e.cache_misses:.0f}"
                    f" ({format_percent(e.cache_hit_ratio)}), evictions {e.cache_evictions:.0f}"
                )
            if e.requests:
                p99 = e.request_latency_ms.p99
                line += f", {e.requests:.0f} GETs ({e.retries:.0f} retried)"
                line += f", p99 {p99:.0f} ms" if p99 is not None else ""
            _say(console, f"   - {line}")
    _print_ranks(s, console)
    _print_diagnosis(s, console, common)
    if scale := at_scale_line(s):
        _say(console, f"   - {scale}")
    if s.cache_state and s.cache_state.note:
        _say(console, f"   - cache: {s.cache_state.note}")
    if outage := outage_line(s):
        _say(console, f"   - {outage}")
    for line in cache_lines(s):
        _say(console, f"   - {line}")
    errors = s.loader_stats.errors
    if errors:
        _say(console, f"   - skipped samples: {errors} (e.g. {list(s.loader_stats.error_examples[:1])})")


def _print_ranks(s: CellSummary, console: Console) -> None:
    """A multi-rank cell's ranks (the sum, skew and slowest are in the verdict's evidence)."""
    d = s.distributed
    if d is None:
        return
    _say(
        console,
        f"   - per rank, over the {d.interval.wall_s:.2f} s all {d.world_size} measured "
        f"({d.nodes} node(s) x {d.ranks_per_node}):",
    )
    wall = d.interval.wall_s
    for r in s.ranks:
        peers = f", waiting for peers {format_percent(r.peer_wait_s / wall)}" if d.sync != "none" else ""
        _say(
            console,
            f"     rank {r.rank} ({r.host}, local {r.local_rank}): {r.samples_per_s:,.0f} samples/s, "
            f"{format_bytes(r.bytes_per_s)}/s, AU {r.au:.2f}, stall {format_percent(r.stall_fraction)}{peers}, "
            f"own verdict {r.verdict}" + (f" ({r.binding_stage})" if r.binding_stage else ""),
        )


def _interval(stats: RepeatSummary, fmt: str) -> str:
    if stats.ci_low is None or stats.ci_high is None:
        return f"{fmt.format(stats.median)} (one run: no interval)"
    return (
        f"{fmt.format(stats.mean)} (95 % CI {fmt.format(stats.ci_low)}-{fmt.format(stats.ci_high)}, "
        f"{stats.n} runs, spread {100 * stats.spread:.1f} %)"
    )


def at_scale_line(s: CellSummary) -> str | None:
    """The synchronous AU this cell's steps predict at scale (analysis/scale.py), in one line."""
    points = [p for p in s.scale if p.world_size in (8, 64, 512, 4096)]
    if not points:
        return None
    parts = [
        f"{p.world_size:,}: AU {p.au:.2f} [{p.au_low:.2f}-{p.au_high:.2f}]{'*' if p.beyond_measured_tail else ''} "
        f"({p.samples_per_s:,.0f}/s)"
        for p in points
    ]
    fabric = s.cell.run.interconnect.name if s.cell.run.interconnect else "no fabric"
    # summaries before the queue model (no scale_queue_depth) drew waits without a queue
    queue = f"loader queue {s.scale_queue_depth}" if s.scale_queue_depth else "no loader queue"
    text = f"synchronous AU predicted at W ranks ({fabric}, {queue}; 95 % bootstrap interval) — " + ", ".join(
        parts
    )
    if any(p.beyond_measured_tail for p in points):
        text += "; * more ranks than measured steps: an upper bound (measure more steps)"
    m, world = s.metrics, s.cell.run.world_size
    if m is not None and m.loader_cores is not None and m.trainer_cores is not None:  # cores_used known
        # the model gives every rank the CPU the measured one had (docs/scale-out.md)
        loader, trainer = m.loader_cores / world, m.trainer_cores / world
        text += (
            f"; a rank used {loader + trainer:.2f} cores here (its loader's readers {loader:.2f}, its trainer "
            f"{trainer:.2f}): ranks that share a host need as many each, or they slow each other and these AUs are high"
        )
    return text


def outage_line(s: CellSummary) -> str | None:
    """The storage outage a cell rode through (loaders/storage/outage.py), in one line; None when
    no connection was refused."""
    requests = s.loader_stats_all_steps.counters.requests
    refused = requests.refused_connections if requests else 0
    if not requests or not refused:
        return None
    return (
        f"storage outage ridden through: {refused:,.0f} connections refused or reset by the store after "
        f"it had answered, each retried; {requests.outage_s:.1f} s of reading lost (summed over the "
        "reader processes)"
    )


def cache_lines(s: CellSummary) -> list[str]:
    """What the shard cache found and did about it (loaders/storage/cachehealth.py, entrysum.py): the
    entries found damaged and fetched again, the bytes read around it, and what it said once."""
    stats = s.loader_stats_all_steps
    cache, health = stats.counters.cache or CacheStats(), stats.counters.cache_health or CacheHealthCounts()
    out = []
    if damaged := cache.damaged:
        out.append(
            f"shard cache: {damaged:,.0f} entr{'y' if damaged == 1 else 'ies'} found damaged when first opened "
            f"({format_bytes(cache.damaged_bytes)} of parts whose checksums at fill differ), "
            "evicted and fetched again: no sample lost"
        )
    if around := health.bypassed_bytes:
        out.append(
            f"shard cache read around: {format_bytes(around)} read through from the store while the cache "
            "could not be used (the figures are the store's, not the cache's)"
        )
    return out + [f"said: {note}" for note in stats.notes]


def scaling_lines(summaries: list[CellSummary]) -> list[str]:
    """Each synchronous multi-rank cell beside what its one-rank twin predicted for it."""
    return [
        f"{c.cell_id}: predicted AU {c.predicted_au:.3f} [{c.predicted_low:.3f}-{c.predicted_high:.3f}] from "
        f"{c.predicted_from}, measured {c.measured_au:.3f}: {100 * c.error:+.1f} %"
        for c in scale.scale_checks(summaries)
    ]


def diagnosis_lines(s: CellSummary) -> list[tuple[str, str]]:
    """Warm-up, repeats, the differential attribution, the capacity answer and what epoch 1 cost,
    as (text, flag) pairs: the flag ("", "warn" or "ok") marks the words a report highlights. The
    terminal and the HTML report both print these, in this order."""
    out: list[tuple[str, str]] = []
    if s.warmup:
        out.append((f"warm-up: {s.warmup.steps} step(s) left out ({s.warmup.method})", ""))
    out += window_lines(s)
    if said := reads_line(s):
        out.append((said, ""))
    if s.stability and s.stability.samples_per_s.n > 1:
        sps, au = s.stability.samples_per_s, s.stability.au
        out.append((f"repeats: samples/s {_interval(sps, '{:,.0f}')}; AU {_interval(au, '{:.2f}')}", ""))
        if s.stability.unstable:
            out.append(("UNSTABLE: the runs disagree by more than 5 %", "warn"))
    if said := split_line(s):
        out.append((said, ""))
    a = s.attribution
    if a:
        out += [
            (a.statement, ""),
            (
                f"predicted {a.predicted_samples_per_s:,.0f}/s (the lowest ceiling) against the measured "
                f"{a.measured_samples_per_s:,.0f}/s: {100 * a.prediction_error:+.0f} %",
                "",
            ),
        ]
        if a.capacity:
            out += capacity_lines(a.capacity)
    out += [(line, "") for line in trainer_lines(s)]
    m = s.metrics
    if m is not None and m.epoch_boundary_wait_ms is not None:
        times = f" ({m.epoch_boundary_wait_ms / m.wait_p50_ms:.1f} x)" if m.wait_p50_ms > 0 else ""
        out.append(
            (
                f"epoch boundary: the first step of a later epoch waited {m.epoch_boundary_wait_ms:.1f} ms, "
                f"against a median step wait of {m.wait_p50_ms:.1f} ms{times}",
                "",
            )
        )
    if s.epoch1_vs_steady is not None:
        out.append(
            (
                f"steady state vs the whole of epoch 1: {100 * s.epoch1_vs_steady:+.0f} % "
                "(what start-up and cold caches cost the first epoch)",
                "",
            )
        )
    return out


def split_line(s: CellSummary) -> str | None:
    """Where the measured window's wall went, every part named and summing to 100 % (the parts
    under half a percent gathered)."""
    split = s.split
    if split is None:
        return None
    parts = sorted(split.parts().items(), key=lambda kv: -kv[1])
    shown = [(k, v) for k, v in parts if v >= 0.005]
    rest = sum(v for k, v in parts if v < 0.005)
    text = ", ".join(f"{PART_LABELS[k]} {100 * v:.1f} %" for k, v in shown)
    if rest > 0:
        text += f", the rest {100 * rest:.1f} %"
    return f"the wall split (sums to {100 * sum(split.parts().values()):.0f} %): {text}"


def capacity_lines(cap: Capacity) -> list[tuple[str, str]]:
    """How many accelerators the input pipeline keeps at >= 90 % AU, and the runs that checked it."""
    n, each = cap.max_accelerators, cap.demand_per_accelerator
    what = f"{cap.accelerator} ({cap.model}, {each:,.0f} samples/s each)"
    takes = cap.trainer_takes_per_accelerator
    if n:
        answer = f"feeds at most {n} x {what} at >= 90 % AU"
    elif takes is not None and takes < 0.9 * each:
        answer = (
            f"cannot keep one {what} at 90 % AU: its trainer alone takes {takes:,.0f}/s (AU at most "
            f"{takes / each:.2f}), whatever the storage"
        )
    else:
        answer = (
            f"cannot keep one {what} at 90 % AU: it feeds "
            f"{min(cap.input_ceiling_samples_per_s, takes or each) / each:.0%} of one"
        )
    checks = "; ".join(f"x{c.count}: AU {c.au:.2f}" for c in cap.checks)
    return [
        (f"capacity: this tier + loader {answer}; checked by running the cell's own trainer ({checks}):", ""),
        ("confirmed", "ok") if cap.confirmed else ("NOT confirmed", "warn"),
    ]


def trainer_lines(s: CellSummary) -> list[str]:
    """The trainer's host (docs/method.md): what AU divides, the step in the cell against the step
    alone, the trainer's CPU per step, the GPU's utilisation NVML saw, and an emulated trainer's host
    work."""
    m = s.metrics
    if m is None:
        return []
    out = []
    if m.au_basis:
        out.append(f"AU = the device busy ({m.au_basis}) / wall")
    if m.trainer_alone_samples_per_s is not None and s.verdict and s.verdict.demand_samples_per_s:
        out.append(
            f"the trainer alone takes {m.trainer_alone_samples_per_s:,.0f} samples/s of the "
            f"{s.verdict.demand_samples_per_s:,.0f}/s demanded"
        )
    if m.trainer_slowdown is not None and m.step_alone_s is not None:
        cpu = (
            f"; the trainer used {m.trainer_cpu_ms_per_step:.1f} CPU-ms per step of its own"
            if m.trainer_cpu_ms_per_step is not None
            else ""
        )
        out.append(
            f"trainer: its step took {1000 * m.step_alone_s * m.trainer_slowdown:.1f} ms (median) in the cell "
            f"against {1000 * m.step_alone_s:.1f} ms alone: slowdown {m.trainer_slowdown:.2f}x{cpu}"
        )
    if s.gpu_utilization_pct is not None:
        out.append(f"GPU utilisation (NVML, mean over the window): {s.gpu_utilization_pct:.0f} %")
    if host_work := s.consumer.get("host_work"):
        out.append(f"emulated trainer's host work per step: {host_work}")
    return out


def _print_diagnosis(s: CellSummary, console: Console, common: Sequence[str] = ()) -> None:
    lines = diagnosis_lines(s)
    for i, (text, flag) in enumerate(lines):
        if flag:  # a flag finishes the line before it
            continue
        follow = lines[i + 1] if i + 1 < len(lines) and lines[i + 1][1] else None
        if follow:
            style = "yellow" if follow[1] == "warn" else ""
            console.print(Text.assemble(f"   - {text} ", (follow[0], style)))
        else:
            _say(console, f"   - {text}")
    for w in s.warnings:
        if w not in common:
            console.print(Text.assemble("   - ", ("note", "yellow"), f": {w}"))
