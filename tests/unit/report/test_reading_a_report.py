"""docs/reading-a-report.md against what the report prints: its examples are the report's output for
tests/data/report-run now (scripts/reading_a_report.py regenerates them), and every term the report
prints is in its glossary."""

from __future__ import annotations

import importlib.util
import re

from rich.console import Console

from iobench.report.terminal import print_report
from iobench.results.api import load_summaries
from tests.helpers.paths import ROOT

RUN = ROOT / "tests" / "data" / "report-run"
DOC = ROOT / "docs" / "reading-a-report.md"


def _script():
    spec = importlib.util.spec_from_file_location("reading_a_report", ROOT / "scripts" / "reading_a_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_the_docs_examples_are_what_the_report_prints_now():
    script = _script()
    doc = script.in_doc(DOC.read_text())
    assert set(doc) == {"report", "detail"}
    now = script.blocks(RUN)
    for name, block in doc.items():
        assert block == now[name], (
            f"docs/reading-a-report.md's '{name}' example differs from the report's output: "
            "run `python scripts/reading_a_report.py tests/data/report-run`"
        )


# what counts as a term: an acronym, a word joined by hyphens, dots or underscores, a percentile
TERM = re.compile(r"\b(?:[A-Z][A-Z0-9]+[a-z]?|[a-z][a-z0-9]*(?:[-._][a-z0-9]+)+|p\d\d)\b")
# words that are not jargon: units, plain English that happens to be hyphenated, names
PLAIN = {"MiB", "GiB", "KiB", "x1"}


def glossary() -> set[str]:
    """The terms docs/reading-a-report.md's glossary defines (its table's first column, in
    backticks, comma-separated)."""
    section = DOC.read_text().split("## Glossary", 1)[1]
    terms = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            terms.update(re.findall(r"`([^`]+)`", first))
    return terms


def _printed(detail: bool) -> str:
    console = Console(record=True, width=200, soft_wrap=True, color_system=None)
    print_report(load_summaries(RUN), console, detail=detail)
    return console.export_text()


def test_every_term_the_report_prints_is_in_the_glossary():
    summaries = load_summaries(RUN)
    names = {s.cell_id for s in summaries} | {s.cell.tier_name for s in summaries}
    known = glossary()
    assert len(known) > 30
    missing = set()
    for detail in (False, True):
        text = _printed(detail)
        for name in names:
            text = text.replace(name, " ")
        for term in TERM.findall(text):
            if term not in known and term not in PLAIN and not re.fullmatch(r"[\d.]+", term):
                missing.add(term)
    assert not missing, f"terms the report prints that docs/reading-a-report.md's glossary lacks: {sorted(missing)}"
