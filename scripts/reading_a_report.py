"""docs/reading-a-report.md's examples, rendered from a run directory by the report's own code.

    python scripts/reading_a_report.py RUN_DIR [CELL]      # rewrite the examples in the doc
    python scripts/reading_a_report.py RUN_DIR --check    # exit 1 when the doc's examples differ

Each example sits between ``<!-- generated: NAME -->`` and ``<!-- /generated -->`` in the doc:
``report`` is ``iobench report RUN_DIR`` as printed, ``detail`` one cell of ``iobench report RUN_DIR
--detail`` (CELL, default the fastest). tests/data/report-run is the run the doc's examples come
from, so the test that runs ``--check`` on it fails when the report's format changes and the doc
was not regenerated.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from pathlib import Path

from rich.console import Console

from iobench.report.terminal import print_report
from iobench.results.api import load_summaries

DOC = Path(__file__).resolve().parents[1] / "docs" / "reading-a-report.md"
BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n```\n)(.*?)(```\n<!-- /generated -->)", re.S)
TITLE = "iobench report runs/default"


def _render(run_dir: Path, detail: bool) -> str:
    console = Console(
        file=io.StringIO(), record=True, width=200, soft_wrap=True, color_system=None, highlight=False
    )
    print_report(load_summaries(run_dir), console, title=TITLE, detail=detail)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()).strip("\n") + "\n"


def _one_cell(report: str, cell_id: str) -> str:
    """The lines of ``cell_id``'s section of a --detail report."""
    lines = report.splitlines()
    start = lines.index(cell_id)
    end = next((i for i in range(start + 1, len(lines)) if not lines[i]), len(lines))
    return "\n".join(lines[start:end]) + "\n"


def blocks(run_dir: Path, cell_id: str | None = None) -> dict[str, str]:
    """Each generated example, by name, as the report prints it now."""
    if cell_id is None:
        ok = [s for s in load_summaries(run_dir) if s.ok and s.metrics is not None]
        cell_id = max(ok, key=lambda s: s.metrics.samples_per_s).cell_id  # type: ignore[union-attr]
    return {
        "report": _render(run_dir, detail=False),
        "detail": _one_cell(_render(run_dir, detail=True), cell_id),
    }


def in_doc(text: str) -> dict[str, str]:
    return {m.group(2): m.group(3) for m in BLOCK.finditer(text)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("cell", nargs="?")
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when the doc differs")
    args = ap.parse_args(argv)
    now = blocks(args.run_dir, args.cell)
    text = DOC.read_text()
    if args.check:
        differ = [name for name, block in in_doc(text).items() if now.get(name) != block]
        if differ:
            print(
                f"{DOC}: the examples {', '.join(differ)} differ from what the report prints now; rerun this script"
            )
            return 1
        return 0
    DOC.write_text(BLOCK.sub(lambda m: m.group(1) + now[m.group(2)] + m.group(4), text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
