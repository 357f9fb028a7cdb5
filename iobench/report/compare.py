"""Two runs side by side: the same cells (matched by cell id) before and after, and which changes
are larger than the noise.

A change in samples/s is *significant* when
- both runs repeated the cell (``run.repeats`` > 1, so each has a 95 % interval for the mean): the
  two intervals do not overlap;
- otherwise: the ratio B/A differs from 1 by more than 5 % (the spread that flags a repeated cell
  as unstable, docs/method.md), since a single run has no interval to compare.

Every row names the rule it used.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..results.api import load_run

THRESHOLD = 0.05
RULE_CI = "95 % CIs do not overlap"
RULE_THRESHOLD = f"change > {100 * THRESHOLD:.0f} % (no interval in both runs)"


def compare_runs(a: str | Path, b: str | Path) -> dict:
    """The comparison of run ``a`` (before) with run ``b`` (after), as plain JSON-able data.

    ``cells`` has one entry per cell id found in both runs, in A's order; ``only_a`` and ``only_b``
    list the others. Per cell: status, samples/s, AU and stall fraction in each run, the ratio of
    samples/s B/A, each run's verdict, whether it changed, which noise rule applied and whether the
    change in samples/s exceeds it (``significant``, with ``direction`` faster / slower).
    """
    rows_a = {r["cell_id"]: r for r in load_run(a).to_pylist()}
    rows_b = {r["cell_id"]: r for r in load_run(b).to_pylist()}
    cells = [_cell(rows_a[cid], rows_b[cid]) for cid in rows_a if cid in rows_b]
    return {
        "run_a": str(a),
        "run_b": str(b),
        "rules": {"ci": RULE_CI, "threshold": RULE_THRESHOLD},
        "cells": cells,
        "only_a": [cid for cid in rows_a if cid not in rows_b],
        "only_b": [cid for cid in rows_b if cid not in rows_a],
    }


def _verdict(row: dict) -> str | None:
    if row.get("status") != "ok":
        return row.get("status") or "failed"  # failed, or interrupted by a stopped sweep
    return (row.get("verdict") or "unknown") + (
        f" ({row['binding_stage']})" if row.get("binding_stage") else ""
    )


def _has_interval(row: dict) -> bool:
    return (row.get("repeats") or 0) > 1 and row.get("samples_per_s_ci_low") is not None


def _cell(ra: dict, rb: dict) -> dict:
    out: dict = {
        "cell_id": ra["cell_id"],
        "status": {"a": ra.get("status"), "b": rb.get("status")},
        "verdict": {"a": _verdict(ra), "b": _verdict(rb), "changed": _verdict(ra) != _verdict(rb)},
    }
    for key in ("samples_per_s", "au", "stall_fraction"):
        out[key] = {"a": ra.get(key), "b": rb.get(key)}
    out["unstable"] = {"a": bool(ra.get("unstable")), "b": bool(rb.get("unstable"))}
    sa, sb = ra.get("samples_per_s"), rb.get("samples_per_s")
    if ra.get("status") != "ok" or rb.get("status") != "ok" or sa is None or sb is None:
        out.update(ratio=None, rule=None, significant=None, direction=None)
        return out
    out["ratio"] = sb / sa if sa > 0 else None
    if _has_interval(ra) and _has_interval(rb):
        out["rule"] = "ci"
        if rb["samples_per_s_ci_low"] > ra["samples_per_s_ci_high"]:
            out.update(significant=True, direction="faster")
        elif rb["samples_per_s_ci_high"] < ra["samples_per_s_ci_low"]:
            out.update(significant=True, direction="slower")
        else:
            out.update(significant=False, direction=None)
    else:
        out["rule"] = "threshold"
        significant = abs(out["ratio"] - 1.0) > THRESHOLD if out["ratio"] is not None else sb != sa
        direction = ("faster" if sb > sa else "slower") if significant else None
        out.update(significant=significant, direction=direction)
    return out


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else fmt.format(x)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def render_comparison(comparison: dict) -> RenderableType:
    """``compare_runs``'s result for the terminal: a table of the shared cells, then the rules used
    and the cells found in only one run. Cell ids and run paths are shown as text, never as markup."""
    table = Table(title="iobench compare", header_style="bold")
    for col, justify in (
        ("cell", "left"),
        ("samples/s A → B", "right"),
        ("B/A", "right"),
        ("AU A → B", "right"),
        ("stall A → B", "right"),
        ("verdict", "left"),
        ("change", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for c in comparison["cells"]:
        sps, au, stall, v = c["samples_per_s"], c["au"], c["stall_fraction"], c["verdict"]
        verdict = (
            Text(v["a"] or "-") if not v["changed"] else Text(f"{v['a']} → {v['b']}", style="bold yellow")
        )
        table.add_row(
            Text(c["cell_id"]),
            f"{_num(sps['a'], '{:,.0f}')} → {_num(sps['b'], '{:,.0f}')}",
            _num(c["ratio"], "{:.2f}x"),
            f"{_num(au['a'], '{:.2f}')} → {_num(au['b'], '{:.2f}')}",
            f"{_pct(stall['a'])} → {_pct(stall['b'])}",
            verdict,
            _change(c),
        )
    lines: list[RenderableType] = [
        table,
        Text(f"A: {comparison['run_a']}\nB: {comparison['run_b']}"),
    ]
    used = sorted({c["rule"] for c in comparison["cells"] if c["rule"]})
    for rule in used:
        lines.append(Text(f"rule [{rule}]: significant when {comparison['rules'][rule]}"))
    for key, run in (("only_a", "A"), ("only_b", "B")):
        if comparison[key]:
            lines.append(Text(f"only in {run}: " + ", ".join(comparison[key]), style="yellow"))
    return Group(*lines)


def _change(c: dict) -> Text:
    if c["rule"] is None:
        bad = [f"{c['status'][run]} in {run.upper()}" for run in ("a", "b") if c["status"][run] != "ok"]
        return Text(f"{' and '.join(bad)}: not compared", style="red")
    unstable = [run.upper() for run in ("a", "b") if c["unstable"][run]]
    note = f"; unstable in {', '.join(unstable)}" if unstable else ""
    if c["significant"]:
        style = "green" if c["direction"] == "faster" else "red"
        return Text(f"{c['direction']} [{c['rule']}]{note}", style=f"bold {style}")
    return Text(f"within noise [{c['rule']}]{note}")
