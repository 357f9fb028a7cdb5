"""What users read names no internal tracker or workspace: no "issue 31" in output, docs, configs or
code comments (a tracker no user has), no path outside the repository. Public sources (a URL, a
project's public issue as owner/repo#N) are fine."""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT

SCANNED = ("iobench", "loaders", "docs", "configs", "benchmarks", "examples", "scripts")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".j2", ".toml", ".txt", ".json"}
INTERNAL = re.compile(r"(?<![/#\w])issues?[ -]#?\d+\b|\.\./shared/|DESIGN\.md", re.I)


def _texts():
    yield ROOT / "README.md"
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES:
                yield path


def test_no_internal_references_reach_users():
    found = []
    for path in _texts():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for m in INTERNAL.finditer(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:120]!r}")
    assert not found, "internal references in what users read:\n" + "\n".join(found)
