"""The terminal report: one row per cell, then each cell's verdict in words with its evidence (and,
for a multi-rank cell, every rank's figures)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from iobench.host.units import format_bytes

LOST_ORDER = ("fetch", "decode", "augment", "collate", "h2d")


def _say(console: Console, line: str) -> None:
    """Plain text: figures, errors and names are never read as rich markup ('[/dev/sda]' in an
    error message would otherwise crash the report, and '[red]' in a tier name would style it)."""
    console.print(line, markup=False)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def results_table(summaries: list[dict]) -> Table:
    table = Table(title="iobench sweep", header_style="bold")
    for col, justify in (
        ("cell", "left"),
        ("cache", "left"),
        ("samples/s", "right"),
        ("read/s", "right"),
        ("AU", "right"),
        ("stall", "right"),
        ("wait p99", "right"),
        ("verdict", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for s in summaries:
        cell = s["cell"]
        if s.get("status") != "ok":
            table.add_row(
                Text(cell["cell_id"]),
                Text(cell.get("cache", "")),
                "-",
                "-",
                "-",
                "-",
                "-",
                Text("failed", "red"),
            )
            continue
        m, v, c = s["metrics"], s["verdict"], s["cache_state"]
        table.add_row(
            Text(cell["cell_id"]),
            f"{c['achieved']} ({_pct(c.get('resident_fraction_before'))} resident)",
            f"{m['samples_per_s']:,.0f}",
            f"{format_bytes(m['bytes_per_s'])}/s",
            f"{m['au']:.2f}",
            _pct(m["stall_fraction"]),
            f"{m['wait_p99_ms']:.0f} ms",
            Text(v["bound"] + (f" ({v['binding_stage']})" if v.get("binding_stage") else "")),
        )
    return table


def print_report(summaries: list[dict], console: Console | None = None) -> None:
    console = console or Console()
    console.print(results_table(summaries))
    for s in summaries:
        cell = s["cell"]
        console.print(Text("\n" + cell["cell_id"], "bold"))
        if s.get("status") != "ok":
            console.print(Text.assemble(("  failed: ", "red"), str(s.get("error"))))
            continue
        v = s["verdict"]
        _say(console, f"  {v['headline']}")
        for line in v["evidence"]:
            _say(console, f"   - {line}")
        epochs = s.get("epochs") or []
        if len(epochs) > 1 or any(e.get("requests") for e in epochs):
            for e in epochs:
                line = f"epoch {e['epoch']}: {e['samples_per_s']:,.0f} samples/s, stall {_pct(e['stall_fraction'])}"
                if e.get("cache_hit_ratio") is not None:
                    line += (
                        f", cache hits {e['cache_hits']:.0f}/{e['cache_hits'] + e['cache_misses']:.0f}"
                        f" ({_pct(e['cache_hit_ratio'])}), evictions {e['cache_evictions']:.0f}"
                    )
                if e.get("requests"):
                    p99 = (e.get("request_latency_ms") or {}).get("p99")
                    line += f", {e['requests']:.0f} GETs ({e['retries']:.0f} retried)"
                    line += f", p99 {p99:.0f} ms" if p99 is not None else ""
                _say(console, f"   - {line}")
        _print_ranks(s, console)
        _print_diagnosis(s, console)
        note = s["cache_state"].get("note")
        if note:
            _say(console, f"   - cache: {note}")
        errors = s["loader_stats"].get("errors") or {}
        if errors:
            _say(console, f"   - skipped samples: {errors} (e.g. {s['loader_stats']['error_examples'][:1]})")


def _print_ranks(s: dict, console: Console) -> None:
    """A multi-rank cell's ranks (the sum, skew and slowest are in the verdict's evidence)."""
    d = s.get("distributed")
    if not d:
        return
    _say(
        console,
        f"   - per rank, over the {d['interval']['wall_s']:.2f} s all {d['world_size']} measured "
        f"({d['nodes']} node(s) x {d['ranks_per_node']}):",
    )
    for r in s.get("ranks") or []:
        _say(
            console,
            f"     rank {r['rank']} ({r['host']}, local {r['local_rank']}): {r['samples_per_s']:,.0f} samples/s, "
            f"{format_bytes(r['bytes_per_s'])}/s, AU {r['au']:.2f}, stall {_pct(r['stall_fraction'])}, "
            f"own verdict {r['verdict']}" + (f" ({r['binding_stage']})" if r.get("binding_stage") else ""),
        )


def _interval(stats: dict, fmt: str) -> str:
    if stats.get("ci_low") is None:
        return f"{fmt.format(stats['median'])} (one run: no interval)"
    return (
        f"{fmt.format(stats['mean'])} (95 % CI {fmt.format(stats['ci_low'])}-{fmt.format(stats['ci_high'])}, "
        f"{stats['n']} runs, spread {100 * stats['spread']:.1f} %)"
    )


def _print_diagnosis(s: dict, console: Console) -> None:
    """Warm-up, repeats, the differential attribution and the capacity answer of one cell."""
    warm = s.get("warmup")
    if warm:
        _say(console, f"   - warm-up: {warm['steps']} step(s) left out ({warm['method']})")
    stability = s.get("stability")
    if stability and stability["samples_per_s"]["n"] > 1:
        sps, au = stability["samples_per_s"], stability["au"]
        flag = (
            (" UNSTABLE: the runs disagree by more than 5 %", "yellow")
            if sps["unstable"] or au["unstable"]
            else ""
        )
        _say(
            console,
            Text.assemble(
                f"   - repeats: samples/s {_interval(sps, '{:,.0f}')}; AU {_interval(au, '{:.2f}')}", flag
            ),
        )
    a = s.get("attribution")
    if a:
        _say(console, f"   - {a['statement']}")
        _say(
            console,
            f"   - measured {a['measured_samples_per_s']:,.0f}/s against the predicted "
            f"{a['predicted_samples_per_s']:,.0f}/s ({100 * a['prediction_error']:+.0f} %)",
        )
        lost = a["lost_fraction"]
        _say(
            console,
            f"   - of the wall time, the accelerator computed {_pct(a['au'])}; lost to "
            + ", ".join(f"{k} {100 * lost[k]:.1f} %" for k in LOST_ORDER if k in lost),
        )
        cap = a.get("capacity")
        if cap:
            n = cap["max_accelerators"]
            what = (
                f"{cap['accelerator']} ({cap['model']}, {cap['demand_per_accelerator']:,.0f} samples/s each)"
            )
            answer = (
                f"feeds at most {n} x {what} at >= 90 % AU"
                if n
                else f"cannot keep one {what} at 90 % AU: it feeds {cap['input_ceiling_samples_per_s'] / cap['demand_per_accelerator']:.0%} of one"
            )
            checks = "; ".join(f"x{c['count']}: AU {c['au']:.2f}" for c in cap["checks"])
            verdict = "confirmed" if cap["confirmed"] else ("NOT confirmed", "yellow")
            _say(
                console,
                Text.assemble(
                    f"   - capacity: this tier + loader {answer}; checked by running it ({checks}): ", verdict
                ),
            )
    first = s.get("epoch1_vs_steady")
    if first is not None:
        _say(
            console,
            f"   - steady state vs the whole of epoch 1: {100 * first:+.0f} % "
            "(what start-up and cold caches cost the first epoch)",
        )
    for w in s.get("warnings") or []:
        console.print(Text.assemble("   - ", ("note", "yellow"), f": {w}"))
