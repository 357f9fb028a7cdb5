"""The recommendation on a terminal and as a JSON document: the answer first (what to buy, why,
what would change it), then the options' table, then where every figure came from. At most 100
columns, in the user's units. Every figure printed names where it came from: measured (a sweep's
cells), given (the user's flags, files, benchmarks), published (a datasheet, a vendor's guide, a
claim), derived (computed from published figures), reference (iobench's own measurement on another
machine) or assumed.

The read side (what the accelerators read) is one block; a write side (checkpoints) can sit beside
it as another block of the same form."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from iobench.results import codec

if TYPE_CHECKING:
    from .placements import PlacementOption
    from .recommendation import Recommendation
    from .scenario import Scenario

WIDTH = 100


def recommendation_json(report: Recommendation) -> dict:
    """The --json document: ``schema_version``, the ``recommendation`` (the answer), then the record
    as the codec writes it (strict JSON: no infinities), the scenario's decode rate at its sample
    size, and the calibration in brief."""
    from .recommendation import SCHEMA_VERSION

    body = codec.to_json(replace(report, calibration=None), finite=True)
    s, a = report.scenario, report.answer
    out = {"schema_version": SCHEMA_VERSION, "recommendation": _answer_json(report), **body}
    del out["answer"]  # written as "recommendation", above
    out["scenario"]["decode"] = s.decode.as_dict(s.sample_bytes)
    out["dataset_source"] = s.dataset_said
    out["read_demand"] = {
        "node": codec.to_json(s.requirement, finite=True),
        "cluster": codec.to_json(s.cluster_requirement, finite=True),
    }
    out["requirement"], out["cluster_requirement"] = out["read_demand"]["node"], out["read_demand"]["cluster"]
    out["calibration"] = _calibration_json(report)
    assert a is not None
    return out


def _answer_json(report: Recommendation) -> dict:
    a, o = report.answer, report.answer.option
    return codec.to_json(
        {
            "option": o.label if o else None,
            "setup": o.setup if o else None,
            "decode": o.decode if o else None,
            "au": o.prediction.au if o else None,
            "au_range": list(o.au_range) if o and o.au_range else None,
            "reaches_target": a.reaches,
            "headline": a.headline,
            "why": list(a.why),
            "would_change": list(a.would_change),
            "changes": [codec.to_json(c, finite=True) for c in a.changes],
            "staging": codec.to_json(o.staging, finite=True) if o and o.staging else None,
            "mix_rule": codec.to_json(report.scenario.mix),
        },
        finite=True,
    )


def _calibration_json(report: Recommendation) -> dict | None:
    cal = report.calibration
    if cal is None:
        return None
    return codec.to_json(
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


def _say(console: Console, text: str, *, style: str = "") -> None:
    """One line of prose, wrapped at the console's width even where the console is told not to
    wrap (piped output): the answer stays within WIDTH columns."""
    console.print(text, markup=False, highlight=False, style=style or None, soft_wrap=False)


def _heading(console: Console, text: str) -> None:
    """A section's heading: bold, a blank line above it."""
    _say(console, "\n" + text, style="bold")


def _answer(report: Recommendation, console: Console) -> None:
    a = report.answer
    _say(console, a.headline, style="bold")
    for line in a.why:
        _say(console, f" - {line}")
    if a.would_change:
        _say(console, "What would change this answer:")
        for line in a.would_change:
            _say(console, f" - {line}")
    if len(a.changes) > 1:
        _say(console, "Other changes that would reach it, cheaper first:")
        for c in a.changes[1:5]:
            _say(console, f" - {c.words} ({c.option}, AU {c.au:.2f})")


def _read_demand(report: Recommendation, console: Console, detail: bool) -> None:
    s = report.scenario
    u, req, total = s.units, s.requirement, s.cluster_requirement
    nodes = f" on {s.nodes} nodes of {s.node_accelerators}" if s.nodes > 1 else ""
    console.print()
    _say(
        console,
        f"Read demand: {s.accelerators} x {s.accelerator}{nodes} read {total.samples_per_s:,.0f} samples/s = "
        f"{u.rate(total.bytes_per_s)}"
        + (f"; per node {req.samples_per_s:,.0f}/s = {u.rate(req.bytes_per_s)}" if s.nodes > 1 else ""),
    )
    said = s.dataset_said if detail else s.dataset_said.split(" (")[0]
    _say(console, f"  of {u.size(s.sample_bytes)} samples; dataset {u.size(s.dataset_bytes)} ({said})")
    nic = (
        f", storage network {u.rate(s.nic_bytes_per_s)}"
        if s.nic_bytes_per_s
        else ", storage network not modelled"
    )
    nvme = f"{s.nvme_devices} x {u.size(s.nvme_bytes / s.nvme_devices)} NVMe" if s.nvme_devices else "no NVMe"
    _say(console, f"Node: {nvme}, {u.size(s.ram_bytes)} RAM, {s.cores} cores{nic}")
    _say(console, f"  {s.target if detail else s.target.split(' (')[0]}")


def _binds(o: PlacementOption, s: Scenario) -> str:
    if not o.feasible:
        short = (x.split(":")[0] if x.startswith(("RAM", "cores")) else "NVMe" for x in o.shortfalls)
        return "does not fit: " + ", ".join(short)
    if o.conditional:
        if o.backend_needed_bytes_per_s is not None:
            return f"needs {s.units.rate(o.backend_needed_bytes_per_s)}"
        return "rate not known"
    return {"accelerator": "demand", "fetch": "fetch", "prep": "prep"}[o.prediction.binding]


def _options_table(report: Recommendation) -> Table:
    s = report.scenario
    u = s.units
    t = Table(
        title="Options for one node, best first", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False
    )
    for col, right in (
        ("#", True),
        ("option", False),
        ("AU", True),
        ("binds", False),
        ("fetch/node", True),
        ("cores", True),
        ("RAM", True),
    ):
        t.add_column(col, justify="right" if right else "left", overflow="fold")
    for i, o in enumerate(report.options, 1):
        au = f"{'<=' if o.conditional else ''}{o.prediction.au:.2f}"
        if o.au_range:
            au += "*"
        fetch = "?" if o.conditional else u.rate(o.fetch_bytes_per_s)
        t.add_row(
            str(i),
            escape(o.label),
            au,
            escape(_binds(o, s)),
            fetch,
            f"{math.ceil(o.cores_needed - 1e-9):,}/{s.cores}",
            f"{u.size(o.ram.needed_bytes)}",
        )
    return t


def _table_notes(report: Recommendation, console: Console) -> None:
    s = report.scenario
    if any(o.au_range for o in report.options):
        _say(console, f" * AU where the cache and its backend share the reads: {s.mix.said}")
        for o in report.options:
            if o.au_range:
                _say(console, f"   {o.label}: AU {o.au_range[0]:.2f}-{o.au_range[1]:.2f}")
    said = set()
    for o in report.options:
        if o.conditional and o.feasible and o.backend_needed_range and o.name not in said:
            said.add(o.name)
            lo, hi = o.backend_needed_range
            span = (
                s.units.rate(lo)
                if math.isclose(lo, hi, rel_tol=1e-3)
                else f"{s.units.rate(lo)}-{s.units.rate(hi)}"
            )
            _say(console, f" - {o.name}: needs {span} per node from its backend for AU 0.90; {o.conditional}")
    for o in report.options:
        if not o.feasible and o.name not in said:
            said.add(o.name)
            _say(console, f" - {o.name} does not fit: {o.why_not}")


def _assumptions(report: Recommendation, console: Console, detail: bool) -> None:
    s = report.scenario
    _heading(console, "Where each input comes from" + ("" if detail else " (--detail: each source in full)"))
    seen: dict[tuple, list[str]] = {}
    for o in report.options:
        for name, fig in o.inputs.items():
            users = seen.setdefault((name, fig.value, fig.source, fig.origin, fig.caveat), [])
            if o.name not in users:
                users.append(o.name)
    every = {o.name for o in report.options}
    for (name, value, source, origin, caveat), users in seen.items():
        where = "" if set(users) == every else f" ({', '.join(users)})"
        shown = s.units.rate(value) if "(bytes/s)" in name else f"{value:,.4g}"
        name = name.replace(" (bytes/s)", "")
        flag = f" CAUTION: {caveat}." if caveat else ""
        _say(console, f" - {name} = {shown}{where} [{origin}]" + (f": {source}" if detail else "") + flag)
    _say(
        console,
        f" - decoder: {s.decode.describe(s.sample_bytes) if detail else s.decode.kind}; {DECODER_NOTE}",
    )
    if not detail:
        return
    _say(console, f" - what the loader does to a sample: {s.decoding_said}")
    _say(
        console,
        f" - cache hit ratio: iobench's shard caches {s.cache_policy} (auto: static when the cache cannot hold "
        f"the dataset), the page cache an LRU; {s.access} epochs; epoch 1 starts cold; with r = cache/dataset "
        "< 1 a static cache serves r of the reads, an LRU under shuffled epochs r + (1-r) ln(1-r)",
    )
    _say(
        console,
        f" - RAM: loader buffers = workers x ({s.prefetch} + 2) batches x {s.batch} x "
        f"{s.units.size(s.decoded_sample_bytes)} per decoded sample, plus a RAM cache of what they leave "
        f"(up to {s.units.size(s.memory_cache)}, {'given' if s.memory_cache_bytes is not None else 'half the RAM'})",
    )


DECODER_NOTE = (
    "the reference rate is simplejpeg's (libjpeg-turbo with SIMD) with iobench's crop and flip; a stock "
    "torchvision pipeline (Pillow decode, RandomResizedCrop, flip, ToTensor, Normalize) decoded 2.2x fewer on "
    "the same core, about 420 images/s (docs/benchmarks.md 'Decode stacks'): price it with --decode-rate 420, "
    "or calibrate on the node"
)


def _carried(report: Recommendation, console: Console) -> None:
    if not report.carried_over:
        return
    _heading(console, "What the runs' measurements carry over to the target")
    for c in report.carried_over:
        _say(console, f" - {c.figure}: {'carried' if c.carried else 'not carried'}: {c.why}")


def _calibration(report: Recommendation, console: Console) -> None:
    cal, s = report.calibration, report.scenario
    if cal is None:
        _say(
            console,
            "\nNo --results: the CPU costs beyond decoding are not measured (the cores are a lower bound). "
            "Run a sweep on the target first.",
        )
        return
    _heading(console, f"Calibration from {len(cal.cells)} cell(s)")
    _say(console, f" - decode+augment: {s.decode.describe(s.sample_bytes)}")
    if cal.collate_ms:
        _say(
            console, f" - collate: {cal.collate_ms.value:.2f} ms of CPU per sample ({cal.collate_ms.source})"
        )
    for name, f in (
        ("loader overhead outside the stage timers", cal.overhead_ms),
        ("the trainer's own CPU (measured, never other processes')", cal.trainer_ms),
    ):
        text = (
            f"{f.value:.2f} ms per sample ({f.source})" if f else "not measured (no such CPU-bound cell): 0"
        )
        _say(console, f" - {name}: {text}")
    for tier in cal.tiers.values():
        bw = tier.bandwidth
        text = (
            "not used for the target (above)"
            if bw is None
            else ("at least " if bw.lower_bound else "") + f"{s.units.rate(bw.value)} ({bw.source})"
        )
        lat = (
            f"; requests p50 {tier.request_p50_ms:.1f} ms, p99 {tier.request_p99_ms:.1f} ms"
            if tier.request_p50_ms
            else ""
        )
        _say(console, f" - tier {tier.name} ({tier.kind}): {text}{lat}")
    if cal.dali_gpu:
        _say(
            console, f" - DALI decode on one GPU: {cal.dali_gpu.value:,.0f} samples/s ({cal.dali_gpu.source})"
        )
    for c in cal.caches:
        _say(
            console,
            f" - cache of {c.cell}: {s.units.size(c.cache_bytes)} for {s.units.size(c.dataset_bytes)}: last epoch "
            f"hit {c.measured_last_epoch:.2f}, the model ({c.policy}, shuffled) {c.predicted:.2f}",
        )


def _mix_cells(report: Recommendation, console: Console) -> None:
    if not report.mix_cells:
        return
    _heading(
        console, "Cache and backend, as --results measured them (samples/s; error = predicted / measured - 1)"
    )
    for c in report.mix_cells:
        _say(
            console,
            f" - {c.cell} ({c.run}), {c.readers} reader(s), hit {c.hit:.2f}: {c.measured:,.0f}; times add "
            f"{c.predicted('harmonic'):,.0f} ({c.error('harmonic'):+.0%}), concurrent "
            f"{c.predicted('concurrent'):,.0f} ({c.error('concurrent'):+.0%})",
        )
    _say(console, f"   rule used: {report.scenario.mix.said}")


def _crossovers(report: Recommendation, console: Console) -> None:
    u = report.scenario.units
    _heading(console, "As the dataset grows (100 GB to 100 TB; this node's NVMe, RAM and cores)")
    first = report.leaders[0]
    _say(
        console,
        f" - {u.size(first.dataset_bytes)}: {first.option} leads (AU {first.au:.2f}"
        + (", its rates not all known)" if first.conditional else ")"),
    )
    for c in report.crossovers:
        tail = f"; but {c.conditional}" if c.conditional else ""
        _say(console, f" - from {u.size(c.dataset_bytes)}: {c.to} leads (before: {c.before}): {c.why}{tail}")
    if not report.crossovers:
        _say(console, " - the leader does not change over this range")


def _hypotheses(report: Recommendation, console: Console) -> None:
    _heading(console, "Published rules of thumb, tested by the model on measured or given figures")
    for h in report.hypotheses:
        verdict = {True: "model agrees", False: "model disagrees", None: "not judged"}[h.agrees]
        _say(console, f" - {h.rule}: {verdict}: {h.model_says}")


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def _interval(interval: tuple[float, float] | None) -> str:
    return f" [{_pct(interval[0])}, {_pct(interval[1])}]" if interval else ""


def _validation(report: Recommendation, console: Console) -> None:
    checks = report.validation
    if not checks:
        return
    _heading(
        console,
        "Predicted vs measured (each cell from the others' calibration and its own per-sample costs; "
        "error = predicted / measured - 1, in brackets against the ends of the measured 95 % interval)",
    )
    for c in checks:
        if c.predicted_samples_per_s is None:
            _say(console, f" - {c.cell}: {c.measured_samples_per_s:,.0f}/s, AU {c.measured_au:.3f}: {c.note}")
            continue
        au = f"{c.predicted_au:.3f}" if c.predicted_au is not None else "-"
        err = (_pct(c.error) if c.error is not None else "-") + _interval(c.error_interval)
        au_err = (_pct(c.au_error) if c.au_error is not None else "-") + _interval(c.au_error_interval)
        _say(
            console,
            f" - {c.cell}: {c.measured_samples_per_s:,.0f}/s measured, {c.predicted_samples_per_s:,.0f}/s predicted "
            f"({err}); AU {c.measured_au:.3f} vs {au} ({au_err}); "
            f"{c.predicted_binding} (verdict {c.measured_verdict})",
        )


def _at_scale(report: Recommendation, console: Console) -> None:
    if not report.at_scale:
        return
    _heading(
        console,
        "At scale (synchronous data-parallel training, from the sweep's measured steps; AU with its 95 % "
        "bootstrap interval)",
    )
    for a in report.at_scale:
        points = ", ".join(
            f"{p.world_size:,}: AU {p.au:.2f} [{p.au_low:.2f}, {p.au_high:.2f}]{'*' if p.beyond_measured_tail else ''}"
            for p in a.points
        )
        _say(console, f" - {a.sentence()}; {points} (all-reduce on {a.fabric}; cell {a.cell})")


def _knees(report: Recommendation, console: Console) -> None:
    if not report.knees:
        return
    _heading(console, "The worker count that trains fastest (cells of --results that differ only in workers)")
    for knee in report.knees:
        for line in knee.lines():
            _say(console, f" {line}")


def render_recommendation(report: Recommendation, console: Console, *, detail: bool = False) -> None:
    """The answer, the read demand and the options' table, then the details (each input's source in
    full with ``detail``); at most WIDTH columns."""
    width = console.width
    console.width = min(width, WIDTH)
    try:
        _answer(report, console)
        _read_demand(report, console, detail)
        console.print(_options_table(report), soft_wrap=False)
        _table_notes(report, console)
        _assumptions(report, console, detail)
        for part in (
            _carried,
            _calibration,
            _mix_cells,
            _crossovers,
            _hypotheses,
            _validation,
            _at_scale,
            _knees,
        ):
            part(report, console)
    finally:
        console.width = width
