"""The recommendation on a terminal (rich tables) and as a JSON document. Every figure printed
names where it came from: measured (a sweep's cells), given (the user's flags, files, benchmarks),
published (a datasheet, a vendor's guide, a claim), reference (iobench's own measurement on
another machine) or assumed."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from iobench.host.units import format_bytes
from iobench.results import codec

from .reasons import label

if TYPE_CHECKING:
    from .recommendation import Recommendation


def to_json(report: Recommendation) -> dict:
    """The --json document: the record as the codec writes it (strict JSON: no infinities), the
    scenario's decode rate at its sample size, and the calibration in brief."""
    out = codec.to_json(replace(report, calibration=None), finite=True)
    s = report.scenario
    out["scenario"]["decode"] = s.decode.as_dict(s.sample_bytes)
    out["dataset_source"], out["requirement"] = s.dataset_said, codec.to_json(s.requirement, finite=True)
    out["cluster_requirement"] = codec.to_json(s.cluster_requirement, finite=True)
    cal = report.calibration
    out["calibration"] = (
        None
        if cal is None
        else codec.to_json(
            {
                "cells": [f"{c.cell_id} ({c.run})" for c in cal.cells],
                "collate_ms": cal.collate_ms,
                "overhead_ms": cal.overhead_ms,
                "trainer_ms": cal.trainer_ms,
                "other_cpu_ms_per_sample": cal.other_ms(),
                "tiers": cal.tiers,
                "caches": cal.caches,
                "cores": cal.cores,
                "dali_gpu": cal.dali_gpu,
            },
            finite=True,
        )
    )
    return out


def _bw(x: float) -> str:
    return "unlimited" if not math.isfinite(x) else f"{x / 1e9:,.2f} GB/s"


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def _interval(interval: tuple[float, float] | None) -> str:
    return escape(f" [{_pct(interval[0])}, {_pct(interval[1])}]") if interval else ""


def _options_table(report: Recommendation) -> Table:
    s, req = report.scenario, report.scenario.requirement
    t = Table(title="Options for one node, best first", title_justify="left")
    for col in ("#", "option", "AU", "binding", "samples/s", "fetch (steady)", "cache hit", "cores", "RAM"):
        t.add_column(
            col, justify="right" if col in ("#", "AU", "samples/s", "cache hit", "cores") else "left"
        )
    for i, o in enumerate(report.options, 1):
        p = o.prediction
        ok = "" if o.feasible else " [red](not feasible)[/red]"
        ram = f"{format_bytes(o.ram.needed_bytes)} of {format_bytes(s.ram_bytes)}" + (
            "" if o.ram.fits else " [red]![/red]"
        )
        cores = f"{o.cores_needed:,.0f} of {s.cores} ({o.cores_per_accelerator:.1f}/acc.)" + (
            "" if o.cores_needed <= s.cores else " [red]![/red]"
        )
        if o.conditional:
            au, binding = f"<= {p.au:.2f}", "rate not known"
            if o.backend_needed_bytes_per_s is not None:
                binding = f"needs >= {_bw(o.backend_needed_bytes_per_s)} per node"
            elif p.capacities["prep"] < 0.9 * req.samples_per_s:
                binding = "prep binds first"
            fetch = "?"
        else:
            au, binding, fetch = f"{p.au:.2f}", p.binding, _bw(o.fetch_bytes_per_s)
        t.add_row(
            str(i),
            label(o) + ok,
            au,
            binding,
            f"{p.samples_per_s:,.0f} of {req.samples_per_s:,.0f}",
            fetch,
            f"{o.hit_ratio:.2f}" if o.cache_bytes and o.delivered is None else "-",
            cores,
            ram,
        )
    return t


def _best(report: Recommendation, console: Console) -> None:
    s = report.scenario
    known = [o for o in report.options if o.feasible and not o.conditional]
    if not known:
        console.print(
            "[bold]No option has every rate it needs[/bold]: give the storage's measured rates (--tier-rate, "
            "--rates) or --results of a sweep on it."
        )
    else:
        best = known[0]
        cluster = (
            f"; the {s.nodes} nodes read {_bw(best.cluster_backend_bytes_per_s)} from its backend together"
            + (
                f" ({_bw(best.cluster_first_epoch_backend_bytes_per_s)} in epoch 1)"
                if math.isfinite(best.cluster_first_epoch_backend_bytes_per_s)
                else ""
            )
            if s.nodes > 1 and best.setup != "local"
            else (f"; each of the {s.nodes} nodes holds a copy" if s.nodes > 1 else "")
        )
        first = (
            "not known: its backend rate is not"
            if math.isnan(best.first_epoch_au)
            else f"{best.first_epoch_au:.2f}"
        )
        console.print(
            f"Best: {label(best)}: AU {best.prediction.au:.2f} ({best.prediction.binding}-bound, "
            f"{best.headroom:.2f} x the demand in the input pipeline; first epoch AU {first}); "
            f"a node feeds {best.max_accelerators} x {s.accelerator} at >= 90 % AU{cluster}"
        )
    said = set()
    for o in report.options:
        if o.conditional and o.feasible and o.backend_needed_bytes_per_s is not None and o.name not in said:
            said.add(o.name)
            console.print(
                f" - {o.name} would need {_bw(o.backend_needed_bytes_per_s)} per node from its backend for AU 0.90 "
                f"({_bw(o.backend_needed_bytes_per_s * s.nodes)} for the {s.nodes} node(s)); "
                f"{o.conditional}",
                highlight=False,
            )


def _assumptions(report: Recommendation, console: Console) -> None:
    console.print("\n[bold]Where each input comes from[/bold]")
    seen: dict[tuple[str, float, str, str], list[str]] = {}
    for o in report.options:
        for name, fig in o.inputs.items():
            users = seen.setdefault((name, fig.value, fig.source, fig.origin), [])
            if o.name not in users:
                users.append(o.name)
    every = {o.name for o in report.options}
    for (name, value, source, origin), users in seen.items():
        where = "" if set(users) == every else f" ({', '.join(users)})"
        console.print(f" - {name} = {value:,.4g}{where} [{origin}]: {source}", markup=False, highlight=False)
    s = report.scenario
    console.print(f" - what the loader does to a sample: {s.decoding_said}", highlight=False)
    console.print(
        f" - cache hit ratio: iobench's shard caches {s.cache_policy} (auto: static when the cache cannot hold "
        f"the dataset, as the tiers choose), the page cache an LRU; {s.access} full epochs; the first epoch "
        "starts cold (0); with r = cache/dataset < 1 a static cache serves r of the reads, an LRU under "
        "shuffled epochs r + (1-r) ln(1-r) (0 when every epoch has the same order); a cache that holds the "
        "dataset serves all (docs/recommend.md)",
        highlight=False,
    )
    console.print(
        f" - RAM: loader buffers = workers x ({s.prefetch} + 2) batches x {s.batch} x "
        f"{format_bytes(s.decoded_sample_bytes)} per decoded sample (~1 MB per 512x512 sample: docs/recommend.md "
        f"'Published claims'), plus the RAM cache ({format_bytes(s.memory_cache)}, "
        f"{'given' if s.memory_cache_bytes is not None else 'half the RAM'})",
        highlight=False,
    )


def _carried(report: Recommendation, console: Console) -> None:
    if not report.carried_over:
        return
    console.print("\n[bold]What the runs' measurements carry over to the target[/bold]")
    for c in report.carried_over:
        mark = "[green]carried[/green]" if c.carried else "[yellow]not carried[/yellow]"
        console.print(f" - {c.figure}: {mark}: ", end="")
        console.print(c.why, markup=False, highlight=False)


def _calibration(report: Recommendation, console: Console) -> None:
    cal = report.calibration
    if cal is None:
        console.print(
            "\nNo --results: the CPU costs beyond decoding are not measured (the cores are a lower bound). "
            "Run a sweep on the target first."
        )
        return
    console.print(f"\n[bold]Calibration[/bold] from {len(cal.cells)} cell(s)")
    s = report.scenario
    console.print(f" - decode+augment: {s.decode.describe(s.sample_bytes)}", markup=False)
    if cal.collate_ms:
        console.print(
            f" - collate: {cal.collate_ms.value:.2f} ms of CPU per sample ({cal.collate_ms.source})"
        )
    for name, f in (
        ("loader overhead outside the stage timers", cal.overhead_ms),
        ("the trainer's own CPU (measured, never other processes')", cal.trainer_ms),
    ):
        text = (
            f"{f.value:.2f} ms per sample ({f.source})" if f else "not measured (no such CPU-bound cell): 0"
        )
        console.print(f" - {name}: {text}")
    for tier in cal.tiers.values():
        bw = tier.bandwidth
        text = (
            "not used for the target (above)"
            if bw is None
            else ("at least " if bw.lower_bound else "") + f"{bw.value / 1e6:,.1f} MB/s ({bw.source})"
        )
        lat = (
            f"; requests p50 {tier.request_p50_ms:.1f} ms, p99 {tier.request_p99_ms:.1f} ms"
            if tier.request_p50_ms
            else ""
        )
        console.print(f" - tier {tier.name} ({tier.kind}): {text}{lat}")
    if cal.dali_gpu:
        console.print(
            f" - DALI decode on one GPU: {cal.dali_gpu.value:,.0f} samples/s ({cal.dali_gpu.source})"
        )
    for c in cal.caches:
        console.print(
            f" - cache of {c.cell}: {format_bytes(c.cache_bytes)} for {format_bytes(c.dataset_bytes)}: last epoch hit "
            f"{c.measured_last_epoch:.2f}, the model ({c.policy}, shuffled) {c.predicted:.2f}"
        )


def _crossovers(report: Recommendation, console: Console) -> None:
    console.print("\n[bold]As the dataset grows[/bold] (100 GB to 100 TB; this node's NVMe, RAM and cores)")
    leaders = report.leaders
    first = leaders[0]
    console.print(
        f" - {format_bytes(first.dataset_bytes)}: {first.option} leads (AU {first.au:.2f}"
        + (", its rates not all known)" if first.conditional else ")")
    )
    for c in report.crossovers:
        console.print(f" - from {format_bytes(c.dataset_bytes)}: {c.to} leads (before: {c.before}): ", end="")
        console.print(
            c.why + (f"; but {c.conditional}" if c.conditional else ""), markup=False, highlight=False
        )
    if not report.crossovers:
        console.print(" - the leader does not change over this range")


def _hypotheses(report: Recommendation, console: Console) -> None:
    console.print("\n[bold]Published rules of thumb, tested by the model on measured or given figures[/bold]")
    for h in report.hypotheses:
        verdict = {
            True: "[green]model agrees[/green]",
            False: "[red]model disagrees[/red]",
            None: "not judged",
        }[h.agrees]
        console.print(f" - {h.rule}: {verdict}: ", end="")
        console.print(h.model_says, markup=False, highlight=False)


def _validation(report: Recommendation, console: Console) -> None:
    checks = report.validation
    if not checks:
        return
    t = Table(
        title="Predicted vs measured (each cell from the others' calibration and its own per-sample costs; "
        "error = predicted / measured - 1, and in brackets against the ends of the measured 95 % interval "
        "over repeats, where the cell has repeats)",
        title_justify="left",
    )
    for col in (
        "cell",
        "samples/s measured",
        "predicted",
        "error",
        "AU measured",
        "predicted",
        "error",
        "binding",
    ):
        t.add_column(col, justify="left" if col in ("cell", "binding") else "right")
    for c in checks:
        if c.predicted_samples_per_s is None:
            t.add_row(
                c.cell, f"{c.measured_samples_per_s:,.0f}", "-", "-", f"{c.measured_au:.3f}", "-", "-", c.note
            )
            continue
        t.add_row(
            c.cell,
            f"{c.measured_samples_per_s:,.0f}",
            f"{c.predicted_samples_per_s:,.0f}",
            _pct(c.error) + _interval(c.error_interval),
            f"{c.measured_au:.3f}",
            f"{c.predicted_au:.3f}" if c.predicted_au is not None else "-",
            (_pct(c.au_error) if c.au_error is not None else "-") + _interval(c.au_error_interval),
            f"{c.predicted_binding} (verdict {c.measured_verdict})",
        )
    console.print()
    console.print(t)


def _at_scale(report: Recommendation, console: Console) -> None:
    scaled = report.at_scale or []
    if not scaled:
        return
    console.print(
        "\n[bold]At scale[/bold] (synchronous data-parallel training, from the sweep's measured steps; "
        "AU with its 95 % bootstrap interval)"
    )
    for a in scaled:
        points = ", ".join(
            f"{p.world_size:,}: AU {p.au:.2f} [{p.au_low:.2f}, {p.au_high:.2f}]{'*' if p.beyond_measured_tail else ''}"
            for p in a.points
        )
        console.print(f" - {a.sentence()}; {points} (all-reduce on {a.fabric}; cell {a.cell})", markup=False)


def _knees(report: Recommendation, console: Console) -> None:
    if not report.knees:
        return
    console.print(
        "\n[bold]The worker count that trains fastest[/bold] (cells of --results that differ only in workers)"
    )
    for knee in report.knees:
        for line in knee.lines():
            console.print(f" {line}", markup=False, highlight=False)


def render(report: Recommendation, console: Console) -> None:
    s, req, total = report.scenario, report.scenario.requirement, report.scenario.cluster_requirement
    nodes = (
        f" on {s.nodes} nodes of {s.node_accelerators}: {total.samples_per_s:,.0f} samples/s = {_bw(total.bytes_per_s)} "
        "in all; per node"
        if s.nodes > 1
        else ""
    )
    console.print(
        f"[bold]{s.accelerators} x {s.accelerator}[/bold]{nodes} need {req.samples_per_s:,.0f} samples/s = "
        f"{_bw(req.bytes_per_s)} of {format_bytes(s.sample_bytes)} samples; dataset {format_bytes(s.dataset_bytes)} "
        f"({s.dataset_said})"
    )
    nic = (
        f", storage network {_bw(s.nic_bytes_per_s)}"
        if s.nic_bytes_per_s
        else ", storage network not modelled"
    )
    console.print(
        f"[bold]Target node[/bold]: NVMe {format_bytes(s.nvme_bytes) if s.nvme_bytes else 'none'}, "
        f"RAM {format_bytes(s.ram_bytes)}, {s.cores} cores{nic}"
    )
    console.print(f"  {s.target}", markup=False, highlight=False)
    console.print(_options_table(report))
    _best(report, console)
    _assumptions(report, console)
    _carried(report, console)
    _calibration(report, console)
    _crossovers(report, console)
    _hypotheses(report, console)
    _validation(report, console)
    _at_scale(report, console)
    _knees(report, console)
