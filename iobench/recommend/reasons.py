"""Why one option ranks above another, in the words of the figures that decided it: every change
of leader in the crossover table and every disagreement with a published rule carries one."""

from __future__ import annotations

import math

from iobench.host.units import format_bytes

from .placements import SETUP_ORDER, Option, rank_key


def label(o: Option) -> str:
    how = {"cpu": "CPU decode", "dali": "DALI decode", "none": "read without decoding"}[o.decode]
    return f"{o.name}, {how}"


def _gbs(x: float) -> str:
    return "unlimited" if not math.isfinite(x) else f"{x / 1e9:,.3g} GB/s"


def fetch_words(o: Option) -> str:
    """How an option's steady-state fetch rate comes about."""
    if o.delivered is not None:
        return f"{_gbs(o.fetch_bytes_per_s)} (delivered by the setup as measured at {o.delivered.sizes()})"
    if o.cache_bytes and o.hit_ratio < 1.0:
        return (
            f"{_gbs(o.fetch_bytes_per_s)} (its {format_bytes(o.cache_bytes)} cache serves {o.hit_ratio:.0%} of the "
            "reads, the backend the rest)"
        )
    if o.cache_bytes:
        return f"{_gbs(o.fetch_bytes_per_s)} (its cache holds the dataset after epoch 1)"
    return _gbs(o.fetch_bytes_per_s)


def standing(o: Option) -> str:
    """An option's AU and what binds it."""
    if o.conditional:
        return f"AU {o.prediction.au:.2f} at most ({o.conditional})"
    p = o.prediction
    what = {
        "fetch": f"fetch-bound at {fetch_words(o)}",
        "prep": f"prep-bound at {p.capacities['prep']:,.0f} samples/s",
        "accelerator": "feeds the demand",
    }[p.binding]
    return f"AU {p.au:.2f}, {what}"


def why_ahead(a: Option, b: Option) -> str:
    """Why ``a`` ranks above ``b`` (options.rank_key), in the first term of the key that differs."""
    ka, kb = rank_key(a), rank_key(b)
    if ka[0] != kb[0]:
        return f"{b.name} cannot hold it: {b.why_not}"
    if ka[1] != kb[1]:
        return f"{a.name}'s rates are known ({standing(a)}), {b.name}'s are not ({b.conditional})"
    if ka[2] != kb[2]:
        return f"{a.name}: {standing(a)}; {b.name}: {standing(b)}"
    if ka[3] != kb[3]:
        return (
            f"both feed the demand (AU 1.00); {a.name} is the simpler setup "
            f"({' < '.join(SETUP_ORDER[:3])}), and the headroom beyond the demand "
            f"({a.headroom:.2f}x vs {b.headroom:.2f}x) buys nothing the job uses"
        )
    if ka[4] != kb[4]:
        return f"both at AU {a.prediction.au:.2f}; {a.name} has more input headroom ({a.headroom:.2f}x vs {b.headroom:.2f}x)"
    if ka[5] != kb[5]:
        return f"equal AU and headroom; {a.name} is the simpler setup"
    return f"equal otherwise; {label(a)} needs no code change beyond {label(b)}"
