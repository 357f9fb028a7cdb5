"""Why one option ranks above another, in the words of the figures that decided it: every change
of leader in the crossover table and every disagreement with a published rule carries one."""

from __future__ import annotations

from .placements import PlacementOption, rank_key
from .storages import HARDWARE
from .units import Units


def fetch_words(o: PlacementOption, units: Units) -> str:
    """How an option's steady-state fetch rate comes about."""
    rate = units.rate(o.fetch_bytes_per_s)
    if o.delivered is not None:
        return f"{rate} (delivered by the setup as measured at {o.delivered.sizes()})"
    if o.cache_bytes and o.hit_ratio < 1.0:
        return f"{rate} (its {units.size(o.cache_bytes)} cache serves {o.hit_ratio:.0%} of the reads, the backend the rest)"
    if o.cache_bytes:
        return f"{rate} (its cache holds the dataset after epoch 1)"
    return rate


def standing(o: PlacementOption, units: Units) -> str:
    """An option's AU and what binds it."""
    p = o.prediction
    if o.conditional:
        return f"AU {p.au:.2f} at most ({o.conditional})"
    what = {
        "fetch": f"fetch-bound at {fetch_words(o, units)}",
        "prep": f"prep-bound at {p.capacities['prep']:,.0f} samples/s",
        "accelerator": "feeds the demand",
    }[p.binding]
    return f"AU {p.au:.2f}, {what}"


def why_ahead(a: PlacementOption, b: PlacementOption, units: Units) -> str:
    """Why ``a`` ranks above ``b`` (placements.rank_key), in the first term of the key that differs."""
    ka, kb = rank_key(a), rank_key(b)
    if ka[0] != kb[0]:
        return f"{b.name} does not fit the node: {b.why_not}"
    if ka[1] != kb[1]:
        return f"{a.name}'s rates are known ({standing(a, units)}), {b.name}'s are not ({b.conditional})"
    if ka[2] != kb[2]:
        return f"{a.name}: {standing(a, units)}; {b.name}: {standing(b, units)}"
    if ka[3] != kb[3]:
        return (
            f"both at AU {a.prediction.au:.2f}; {a.label} keeps fewer cores busy "
            f"({a.cores_needed:,.0f} against {b.cores_needed:,.0f} per node)"
        )
    if HARDWARE[a.setup] != HARDWARE[b.setup]:
        both = "both feed the demand (AU 1.00)" if ka[2] <= -1.0 else f"both at AU {a.prediction.au:.2f}"
        return f"{both}; {a.name} is the simpler setup (less hardware, as many cores)"
    if ka[5] != kb[5]:
        return f"equal AU and cores; {a.name} is the simpler setup"
    return f"equal otherwise; {a.label} needs no code change beyond {b.label}"
