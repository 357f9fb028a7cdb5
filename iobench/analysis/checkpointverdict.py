"""The sentence a checkpoint cell, and a set of them, ends with (docs/checkpoints.md):

    checkpointing every K steps costs X % of accelerator time on this tier (sync); async_pinned Y %;
    the tier writes Z GB/s per node; ≤ 1 % at this interval needs W GB/s

X and Y are the cells' costs (AU without checkpoints less AU with them, analysis/checkpointcost.py),
Z the sync cell's save rate per node, W the rate per node at which a sync save's blocked time would
be 1 % of the wall at this interval: the state's bytes per node over 1 % of K clean steps' time.
"""

from __future__ import annotations

from collections.abc import Sequence

from iobench.results.checkpoint import CheckpointFigures

TARGET_OVERHEAD = 0.01


def needed_gb_per_s(
    state_bytes_per_node: float, every_steps: int, step_s: float, overhead: float = TARGET_OVERHEAD
) -> float:
    """The write rate per node that keeps a blocking save at ``overhead`` of the wall: its seconds
    b over K steps of ``step_s`` and b itself is the share, b / (K t + b) = overhead."""
    budget = overhead / (1 - overhead) * every_steps * step_s
    return state_bytes_per_node / budget / 1e9 if budget > 0 else float("inf")


def sentence(figures: Sequence[CheckpointFigures]) -> str:
    """The verdict over cells of one destination and interval (any of the three modes present)."""
    costs = {f.settings.mode: (f, f.cost) for f in figures if f.cost is not None}
    if not costs:
        return "no checkpoint cell measured a save"
    lead_mode = "sync" if "sync" in costs else next(iter(costs))
    lead, lead_cost = costs[lead_mode]
    every = lead.settings.every_steps
    text = f"checkpointing every {every} steps costs {_pct(lead_cost.cost)} of accelerator time on {lead.where} ({lead_mode})"
    for mode in ("async", "async_pinned"):
        if mode in costs and mode != lead_mode:
            text += f"; {mode} {_pct(costs[mode][1].cost)}"
    text += f"; the tier writes {lead.save.gb_per_s_per_node:.2f} GB/s per node"
    step_s = lead_cost.clean_step_s
    if step_s:
        per_node = lead.settings.state_bytes / max(1, lead.nodes)
        text += f"; ≤ 1 % at this interval needs {needed_gb_per_s(per_node, every, step_s):.2f} GB/s"
    return text


def _pct(x: float | None) -> str:
    """A cost in words; None: no step ran without a save beside it (the saves outlast the interval)."""
    return "an unmeasured share (no step ran clear of a save)" if x is None else f"{100 * x:.1f} %"
