"""Two runs side by side: the same cells (matched by cell id) before and after, and which changes
are larger than the noise.

A change in samples/s is *significant* when
- both runs repeated the cell (``run.repeats`` > 1): Welch's t-test of the two means (unequal
  variances, docs/method.md) gives p < 0.05;
- otherwise: the ratio B/A differs from 1 by more than 5 % (the spread that flags a repeated cell
  as unstable, docs/method.md), since a single run has no variance to test against.

Every row names the rule it used. Before the figures, the comparison names what differs between
the two runs' configurations (:func:`config_differences`): a run of 2 epochs against one of 6, or
of another dataset or library version, is not a before/after of one change.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..analysis.repeats import welch_test
from ..host.units import format_percent
from ..report.tables import Columns, with_columns
from ..results.api import load_summaries
from ..results.codec import to_json
from ..results.figures import RepeatSummary
from ..results.store import read_manifest
from ..results.summary import CellSummary

THRESHOLD = 0.05
ALPHA = 0.05
RULE_WELCH = f"Welch's t-test of the repeats' means, p < {ALPHA:g}"
RULE_THRESHOLD = f"change > {100 * THRESHOLD:.0f} % (no repeats in both runs)"


def compare_runs(a: str | Path, b: str | Path) -> dict:
    """The comparison of run ``a`` (before) with run ``b`` (after), as plain JSON-able data.

    ``cells`` has one entry per cell id found in both runs, in A's order; ``only_a`` and ``only_b``
    list the others. Per cell: status, samples/s, AU and stall fraction in each run, the ratio of
    samples/s B/A, each run's verdict, whether it changed, which noise rule applied (with Welch's
    t, df and p where it was the test) and whether the change in samples/s exceeds it
    (``significant``, with ``direction`` faster / slower).
    """
    cells_a = {s.cell_id: s for s in load_summaries(a)}
    cells_b = {s.cell_id: s for s in load_summaries(b)}
    cells = [_cell(cells_a[cid], cells_b[cid]) for cid in cells_a if cid in cells_b]
    return {
        "run_a": str(a),
        "run_b": str(b),
        "differences": config_differences(a, b, [cid for cid in cells_a if cid in cells_b]),
        "rules": {"welch": RULE_WELCH, "threshold": RULE_THRESHOLD},
        "cells": cells,
        "only_a": [cid for cid in cells_a if cid not in cells_b],
        "only_b": [cid for cid in cells_b if cid not in cells_a],
    }


# what of a cell's record is its configuration (the summary's ``cell``) and what of its manifest
# describes the data, the software and the machine; cell_id matches the pair, so it never differs
_MANIFEST_PARTS = ("dataset", "versions", "host")
_NOT_CONFIG = {"cell.cell_id", "host.usable_cpus"}


def _flat(value: object, prefix: str) -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    return {prefix: value}


def _described(run: str | Path, cell_id: str, summary: CellSummary) -> dict[str, object]:
    out = _flat(to_json(summary.cell), "cell")
    manifest = read_manifest(Path(run), cell_id)
    if manifest is not None:
        for part in _MANIFEST_PARTS:
            out.update(_flat(to_json(getattr(manifest, part)), part))
    return {k.removeprefix("cell."): v for k, v in out.items() if k not in _NOT_CONFIG}


def config_differences(a: str | Path, b: str | Path, cell_ids: list[str]) -> list[dict]:
    """What differs between the runs' configurations, over the cells both ran: each setting (the
    cell's tier, loader, accelerator, cache and run settings; its dataset, library versions and
    host from the manifest) with its values in A and B and how many of the cells differ in it."""
    summaries_a = {s.cell_id: s for s in load_summaries(a)}
    summaries_b = {s.cell_id: s for s in load_summaries(b)}
    found: dict[str, dict] = {}
    for cid in cell_ids:
        da, db = _described(a, cid, summaries_a[cid]), _described(b, cid, summaries_b[cid])
        for key in sorted(set(da) | set(db)):
            va, vb = da.get(key), db.get(key)
            if va != vb and va is not None and vb is not None:  # a key only one side records: a format change
                d = found.setdefault(key, {"setting": key, "a": set(), "b": set(), "cells": 0})
                d["a"].add(repr(va))
                d["b"].add(repr(vb))
                d["cells"] += 1
    return [
        {**d, "a": sorted(d["a"]), "b": sorted(d["b"]), "of": len(cell_ids)}
        for d in sorted(found.values(), key=lambda d: d["setting"])
    ]


def _verdict(s: CellSummary) -> str:
    if not s.ok or s.verdict is None:
        return s.status  # failed, or interrupted by a stopped sweep
    return s.verdict.bound + (f" ({s.verdict.binding_stage})" if s.verdict.binding_stage else "")


def _repeats(s: CellSummary) -> RepeatSummary | None:
    """The cell's samples/s over its repeats, when it was repeated."""
    return s.stability.samples_per_s if s.stability is not None and s.stability.samples_per_s.n > 1 else None


def _cell(sa: CellSummary, sb: CellSummary) -> dict:
    out: dict = {
        "cell_id": sa.cell_id,
        "status": {"a": sa.status, "b": sb.status},
        "verdict": {"a": _verdict(sa), "b": _verdict(sb), "changed": _verdict(sa) != _verdict(sb)},
    }
    for key in ("samples_per_s", "au", "stall_fraction"):
        out[key] = {
            "a": getattr(sa.metrics, key) if sa.metrics else None,
            "b": getattr(sb.metrics, key) if sb.metrics else None,
        }
    out["unstable"] = {
        "a": bool(sa.stability and sa.stability.unstable),
        "b": bool(sb.stability and sb.stability.unstable),
    }
    if sa.metrics is None or sb.metrics is None or not sa.ok or not sb.ok:
        out.update(ratio=None, rule=None, significant=None, direction=None)
        return out
    xa, xb = sa.metrics.samples_per_s, sb.metrics.samples_per_s
    out["ratio"] = xb / xa if xa > 0 else None
    ra, rb = _repeats(sa), _repeats(sb)
    if ra is not None and rb is not None:
        test = welch_test(ra, rb)
        significant = test.p_value < ALPHA
        out.update(
            rule="welch",
            welch={"t": test.t, "df": test.df, "p": test.p_value},
            significant=significant,
            direction=("faster" if test.t > 0 else "slower") if significant else None,
        )
    else:
        significant = abs(out["ratio"] - 1.0) > THRESHOLD if out["ratio"] is not None else xb != xa
        out.update(
            rule="threshold",
            significant=significant,
            direction=("faster" if xb > xa else "slower") if significant else None,
        )
    return out


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else fmt.format(x)


def render_comparison(comparison: dict) -> RenderableType:
    """``compare_runs``'s result for the terminal: a table of the shared cells, then the rules used
    and the cells found in only one run. Cell ids and run paths are shown as text, never as markup."""
    columns: Columns = (
        ("cell", "left"),
        ("samples/s A → B", "right"),
        ("B/A", "right"),
        ("AU A → B", "right"),
        ("stall A → B", "right"),
        ("verdict", "left"),
        ("change", "left"),
    )
    table = with_columns(Table(title="iobench compare", header_style="bold"), columns)
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
            f"{format_percent(stall['a'])} → {format_percent(stall['b'])}",
            verdict,
            _change(c),
        )
    lines: list[RenderableType] = [
        Text(f"A: {comparison['run_a']}\nB: {comparison['run_b']}"),
        *_differences(comparison["differences"]),
        table,
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
    p = f", p={c['welch']['p']:.3g}" if c["rule"] == "welch" else ""
    if c["significant"]:
        style = "green" if c["direction"] == "faster" else "red"
        return Text(f"{c['direction']} [{c['rule']}{p}]{note}", style=f"bold {style}")
    return Text(f"within noise [{c['rule']}{p}]{note}")


def _differences(differences: list[dict]) -> list[Text]:
    if not differences:
        return [Text("the two runs' configurations agree (cells, dataset, library versions, host)")]
    out = [
        Text("the configurations differ, so a change below may come from any of these:", style="bold yellow")
    ]
    for d in differences:
        where = "" if d["cells"] == d["of"] else f" (in {d['cells']} of {d['of']} cells)"
        out.append(
            Text(f"  {d['setting']}: {' / '.join(d['a'])} → {' / '.join(d['b'])}{where}", style="yellow")
        )
    return out
