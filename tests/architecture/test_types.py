"""The package and the loaders type-check (mypy, configured in pyproject.toml's [tool.mypy]).

A consumer that lacked a member the trainer-alone timing asks for once reached a whole test run
before anything said so; a type checker says it at once. Where the checker cannot follow a true
fact, a `type: ignore` names the error it silences and says why, and they stay few.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import ROOT

PACKAGES = ("iobench", "loaders")
MOST_IGNORES = 40
# `# type: ignore[code, code]  # why`: the codes silenced, then the reason
EXPLAINED_IGNORE = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(,\s*[a-z-]+)*\]\s+#\s*\S")


def _mypy(*targets: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), *targets]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_package_and_the_loaders_type_check():
    result = _mypy()
    assert result.returncode == 0, f"mypy found errors (fix the types):\n{result.stdout}{result.stderr}"


def test_the_check_fails_on_a_wrong_type(tmp_path: Path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from iobench.results.choices import Bound\n\n\ndef judge() -> Bound:\n    return 'sideways'\n"
    )
    result = _mypy(str(wrong))
    assert result.returncode == 1 and "wrong.py:5: error" in result.stdout, result.stdout + result.stderr


def ignores(text: str) -> list[tuple[int, str]]:
    """Each line of ``text`` that silences the checker, with its number."""
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if "type: ignore" in line]


def test_each_ignore_names_its_error_and_says_why_and_they_stay_few():
    found = [
        (f"{path.relative_to(ROOT)}:{n}", line)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for n, line in ignores(path.read_text())
    ]
    unexplained = [where for where, line in found if not EXPLAINED_IGNORE.search(line)]
    assert not unexplained, "name the error code and say why: " + ", ".join(unexplained)
    assert len(found) <= MOST_IGNORES, f"{len(found)} type: ignore comments; fix types instead"


def test_an_ignore_without_its_code_or_reason_is_found():
    assert EXPLAINED_IGNORE.search("x = f()  # type: ignore[arg-type]  # a tensor")
    assert not EXPLAINED_IGNORE.search("x = f()  # type: ignore")
    assert not EXPLAINED_IGNORE.search("x = f()  # type: ignore[arg-type]")
