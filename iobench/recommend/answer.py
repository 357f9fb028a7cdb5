"""The answer, before any table: what to buy, why, and what would change it.

The recommendation is the best-ranked option that fits the node (its NVMe, RAM and cores hold it)
and whose every rate is known; there is none where no option does. When it does not reach the
target AU, the answer says so first and names the cheapest change that would (changes.py), each
checked by pricing the option again with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iobench.analysis.verdict import AU_TARGET

from .changes import Change
from .crossovers import Crossover
from .placements import PlacementOption, Scenario
from .reasons import fetch_words

# figures an answer may rest on without measuring them first
SOLID = ("measured", "given")


@dataclass(frozen=True)
class Answer:
    option: PlacementOption | None  # what to buy; None: no option fits the node with its rates known
    reaches: bool  # it reaches the target AU
    headline: str
    why: tuple[str, ...]
    changes: tuple[Change, ...]  # what would reach the target, cheapest first
    would_change: tuple[str, ...]  # what would change this answer


def _fits(s: Scenario, o: PlacementOption) -> str:
    u = s.units
    nvme = (
        f"{u.size(s.dataset_bytes if o.setup == 'local' else s.dataset_bytes / s.nodes)} of its "
        f"{u.size(s.nvme_bytes)} NVMe, "
        if o.setup in ("local", "sharded")
        else ""
    )
    cores = min(math.ceil(o.cores_needed - 1e-9), s.cores)  # whole cores, as the table counts them
    net = (
        f", {u.rate(o.remote_bytes_per_s)} over a {u.rate(s.nic_bytes_per_s)} storage network"
        if o.remote_bytes_per_s and s.nic_bytes_per_s
        else ""
    )
    return f"fits the node: {nvme}{cores:,.0f} of {s.cores} cores, {u.size(o.ram.needed_bytes)} of {u.size(s.ram_bytes)} RAM{net}"


def _au(o: PlacementOption) -> str:
    au = f"AU {o.prediction.au:.2f}"
    if o.au_range:
        au += f" ({o.au_range[0]:.2f}-{o.au_range[1]:.2f} by how the cache and backend share the reads)"
    return au


def _binds(s: Scenario, o: PlacementOption) -> str:
    p = o.prediction
    if p.binding == "accelerator":
        return f"feeds the {p.capacities['accelerator']:,.0f} samples/s a node's accelerators take"
    if p.binding == "fetch":
        return f"fetch-bound at {fetch_words(o, s.units)}"
    return (
        f"prep-bound: {p.capacities['prep']:,.0f} of the {p.capacities['accelerator']:,.0f} samples/s needed"
    )


def _what(o: PlacementOption) -> str:
    how = {
        "cpu": "decoded on the CPU",
        "dali": "decoded on the GPUs with DALI",
        "none": "read without decoding",
    }
    return f"{o.name}, {how[o.decode]}"


def _why(s: Scenario, o: PlacementOption) -> list[str]:
    lines = [f"{_au(o)}: {_binds(s, o)}", _fits(s, o)]
    if o.staging is not None:
        lines.append(f"staging: {o.staging.words(s)}")
    elif (o.cache_bytes and o.hit_ratio < 1.0) or o.first_epoch_au < (o.prediction.au or 0) - 5e-3:
        first = "not known" if math.isnan(o.first_epoch_au) else f"{o.first_epoch_au:.2f}"
        lines.append(f"no copy first: its cache fills during epoch 1 (AU {first} then)")
    if s.nodes > 1 and o.cluster_backend_bytes_per_s:
        lines.append(
            f"the {s.nodes} nodes read {s.units.rate(o.cluster_backend_bytes_per_s)} from the shared store together"
        )
    return lines


def _would_change(s: Scenario, o: PlacementOption, crossovers: tuple[Crossover, ...]) -> list[str]:
    out = []
    weak = sorted(
        {f"{name.split(' (')[0]} [{f.origin}]" for name, f in o.inputs.items() if f.origin not in SOLID}
    )
    if weak:
        out.append(
            f"it rests on figures nobody measured here: {', '.join(weak)}; measure them (--results, --tier-rate)"
        )
    caveats = [f"{name.split(' (')[0]}: {f.caveat}" for name, f in o.inputs.items() if f.caveat]
    out.extend(caveats)
    later = [c for c in crossovers if c.dataset_bytes > s.dataset_bytes]
    if later:
        c = later[0]
        unknown = "; its rate is not known" if c.conditional else ""
        out.append(f"from {s.units.size(c.dataset_bytes)} of data: {c.to} leads instead ({c.why}{unknown})")
    return out


def answer(
    s: Scenario,
    opts: tuple[PlacementOption, ...],
    changes: tuple[Change, ...],
    crossovers: tuple[Crossover, ...],
) -> Answer:
    """The recommendation among ``opts`` (ranked), said in a headline and its reasons."""
    best = next((o for o in opts if o.feasible and not o.conditional), None)
    reaches = best is not None and best.reaches
    if best is not None and reaches:
        return Answer(
            best,
            True,
            f"Buy: {_what(best)}",
            tuple(_why(s, best)),
            (),
            tuple(_would_change(s, best, crossovers)),
        )
    fits = any(o.feasible for o in opts)
    if best is None:
        headline = f"No option reaches AU {AU_TARGET:.2f} on this node: " + (
            "none has every rate it needs" if fits else "none fits it"
        )
        shown = next((o for o in opts if changes and o.label == changes[0].option), None) or opts[0]
        why = [shown.why_not] if shown.why_not else []
    else:
        headline = f"No option reaches AU {AU_TARGET:.2f} on this node; the best is {_what(best)}"
        why = _why(s, best)
    if changes:
        first = changes[0]
        headline += f". The cheapest change that would: {first.words} ({first.option}, AU {first.au:.2f})"
    else:
        headline += ". No change of a rate, drives, RAM, cores or GPU decode alone reaches it here"
    return Answer(best, False, headline, tuple(why), changes, ())
