"""The bottom line of a run, in at most six lines: what binds per tier and loader, how far the best
cell is from the target AU and how sure that is, whether the storage tier moved the AU at all (the
tier differential: a sweep across tiers whose AU does not move with the tier is bound by its host),
and the one change with the largest expected gain with its predicted effect and the cores per
accelerator the judge computed. The terminal report ends with it and the HTML report opens with it."""

from __future__ import annotations

from collections import defaultdict

from iobench.analysis.losses import loss_line
from iobench.analysis.verdict import AU_TARGET, while_busy
from iobench.results.summary import CellSummary

from .measured import metrics_of, verdict_of

MAX_GROUPS = 3  # with the tier differential, the gain and a note, six lines


def _workers(counts: list[int]) -> str:
    words = [str(w) for w in sorted(counts)]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _sure(s: CellSummary) -> str:
    """How sure the cell's AU is: its interval over the window (batch means) or over repeats, and the
    window."""
    m, w = s.metrics, s.window
    assert m is not None
    parts = []
    if s.stability is not None and s.stability.au.n > 1 and s.stability.au.ci_low is not None:
        parts.append(f"{s.stability.au.ci_low:.2f}-{s.stability.au.ci_high:.2f} over {s.stability.au.n} runs")
    elif w is not None and w.au_rel_ci is not None:
        parts.append(f"±{100 * w.au_rel_ci:.0f} %")
    if w is not None:
        parts.append(f"{w.seconds:.1f} s, {w.steps} steps")
    return f" ({'; '.join(parts)})" if parts else ""


def _group_line(label: str, cells: list[CellSummary]) -> str:
    by_verdict: dict[str, list[int]] = defaultdict(list)
    for s in cells:
        by_verdict[verdict_of(s).name].append(s.cell.loader.workers)
    binds = "; ".join(f"{name} at {_workers(w)} worker(s)" for name, w in by_verdict.items())
    best = max(cells, key=lambda s: metrics_of(s).samples_per_s)
    m = metrics_of(best)
    gap = (
        "at the target"
        if m.au >= AU_TARGET
        else f"{AU_TARGET - m.au:.2f} short of the {AU_TARGET:.2f} target"
    )
    return (
        f"{label}: {binds}; best {best.cell.loader.workers} worker(s): {m.samples_per_s:,.0f} samples/s, "
        f"AU {m.au:.2f}{_sure(best)}, {gap}"
    )


def predicted_gain(s: CellSummary) -> str | None:
    """What lifting the cell's binding part would give: the next limit (the fetch and prep ceilings
    where diagnosed, else the online timers' fetch capacity; and the trainer alone, the same figure
    as the cell's metrics), as samples/s and AU on the cell's basis."""
    m, v = s.metrics, s.verdict
    if m is None or v is None or m.samples <= 0 or m.device_busy_s is None:
        return None
    device_per_sample = m.device_busy_s / m.samples
    # the cores spent are the prep ceiling's limit seen from the host: neither is the next one
    binding = {"prep", "cores"} if v.bound in ("prep", "cores") else {v.bound}
    others: dict[str, float] = {}
    if s.ceilings is not None:
        inputs = (s.ceilings.fetch, s.ceilings.prep)
        others = {
            c.name: c.samples_per_s for c in inputs if c and c.name not in binding and c.samples_per_s > 0
        }
    elif v.bound in ("prep", "cores"):
        fetch = next((st for st in v.stages if st.stage == "fetch"), None)
        if fetch is not None and fetch.capacity_samples_per_s != float("inf"):
            others["fetch"] = fetch.capacity_samples_per_s
    if m.trainer_alone_samples_per_s and m.trainer_alone_quiet is not False:
        others["accelerator"] = m.trainer_alone_samples_per_s
    if not others or v.bound in ("accelerator", "unknown"):
        if m.trainer_alone_quiet is False and v.bound not in ("accelerator", "unknown"):
            return f"the next limit is not judged: the trainer alone was timed {while_busy(m)}"
        return None
    nxt = min(others, key=others.__getitem__)
    rate = others[nxt]
    name = "the trainer alone" if nxt == "accelerator" else f"the {nxt} ceiling"
    said = f"the next limit is {name} at {rate:,.0f}/s: AU up to {min(1.0, rate * device_per_sample):.2f}"
    if m.trainer_alone_quiet is False:  # the trainer's own rate is not known: it may come first
        said += f" (the trainer alone, timed {while_busy(m)}, is not judged: it may bind first)"
    return said


def _au_interval(s: CellSummary) -> tuple[float, float]:
    """A cell's AU with its interval: over repeats, else over the window (batch means)."""
    m, w = s.metrics, s.window
    assert m is not None
    if s.stability is not None and s.stability.au.ci_low is not None and s.stability.au.ci_high is not None:
        return s.stability.au.ci_low, s.stability.au.ci_high
    half = m.au * (w.au_rel_ci or 0.0) if w is not None else 0.0
    return m.au - half, m.au + half


def tier_differential(ok: list[CellSummary]) -> str | None:
    """Across tiers read by one loader: whether the best AU on each tier moved with the tier beyond
    the intervals. Where it did not, the storage is not what binds: the host (its cores, the
    trainer) does. None with one tier."""
    by_loader: dict[str, dict[str, CellSummary]] = defaultdict(dict)
    for s in ok:
        best = by_loader[s.cell.loader.kind].get(s.cell.tier_name)
        if best is None or metrics_of(s).au > metrics_of(best).au:
            by_loader[s.cell.loader.kind][s.cell.tier_name] = s
    for loader, tiers in by_loader.items():
        if len(tiers) < 2:
            continue
        spans = {tier: _au_interval(s) for tier, s in tiers.items()}
        aus = ", ".join(f"{tier} {metrics_of(s).au:.2f}" for tier, s in tiers.items())
        if max(low for low, _ in spans.values()) <= min(high for _, high in spans.values()):
            return (
                f"tier differential ({loader}): the AU does not move with the tier ({aus}, within their "
                "intervals): the host binds, not the storage"
            )
        fastest = max(tiers, key=lambda t: metrics_of(tiers[t]).au)
        return f"tier differential ({loader}): the AU moves with the tier ({aus}): the storage binds; {fastest} reads fastest"
    return None


def cores_said(s: CellSummary) -> str | None:
    """The cores per accelerator the judge computed for the cell, as the verdict carries them."""
    need = s.verdict.cores if s.verdict is not None else None
    if need is None:
        return None
    return (
        f"{need.per_accelerator:.1f} cores per accelerator feed its {need.samples_per_s:,.0f}/s ({need.fed}): "
        f"{need.loader:.1f} loader + {need.trainer:.1f} trainer"
    )


def losses_line(cells: list[CellSummary]) -> str | None:
    """The first cell whose epochs lost samples, said as its headline says it (analysis/losses.py)."""
    lost = [(s.cell_id, losses) for s in cells if (losses := s.losses) is not None]
    if not lost:
        return None
    more = f" (and {len(lost) - 1} more cell(s): read their headlines)" if len(lost) > 1 else ""
    cell_id, losses = lost[0]
    return f"{cell_id}: {loss_line(losses)}{more}"


def bottom_line(summaries: list[CellSummary]) -> list[str]:
    """At most six lines; none when no cell measured anything."""
    ok = [s for s in summaries if s.ok and s.metrics is not None and s.verdict is not None]
    if not ok:
        failed = len(summaries)
        return [f"no cell measured anything ({failed} failed: see each cell's error above)"] if failed else []
    groups: dict[str, list[CellSummary]] = defaultdict(list)
    for s in ok:
        groups[f"{s.cell.tier_name} / {s.cell.loader.kind}"].append(s)
    lines = [_group_line(label, cells) for label, cells in list(groups.items())[:MAX_GROUPS]]
    if said := losses_line(ok):  # before the rest: a rate measured on fewer samples than planned
        lines.insert(0, said)
    if len(groups) > MAX_GROUPS:
        lines[-1] += f" (and {len(groups) - MAX_GROUPS} more tier/loader pairs in the table)"
    if differential := tier_differential(ok):
        lines.append(differential)
    best = max(ok, key=lambda s: metrics_of(s).au)
    action = verdict_of(best).action
    if action:
        gain = predicted_gain(best)
        lines.append(f"largest gain ({best.cell_id}): {action}" + (f"; {gain}" if gain else ""))
    elif cores := cores_said(best):
        lines.append(f"{best.cell_id}: {cores}")
    flagged = [s.cell_id for s in ok if s.window is not None and (not s.window.met or s.window.cached)]
    failed = len(summaries) - len(ok)
    notes = []
    if flagged:
        notes.append(f"{len(flagged)} cell(s) measured a short or cached window: read their headlines")
    if failed:
        notes.append(f"{failed} cell(s) failed")
    if notes:
        lines.append("; ".join(notes))
    return lines[:6]
