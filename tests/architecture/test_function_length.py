"""No function of the package or the loaders runs over 80 lines (its docstring and decorators
included): past that a function does more than one thing, and its parts want names of their own."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.helpers.paths import ROOT

LIMIT = 80
PACKAGES = ("iobench", "loaders")


def long_functions(source: str, path: str) -> Iterator[str]:
    """Each function in ``source`` over LIMIT lines, as ``path:line name (N lines)``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = node.end_lineno - first + 1
            if length > LIMIT:
                yield f"{path}:{node.lineno} {node.name} ({length} lines)"


def test_no_function_runs_over_80_lines():
    found = [
        hit
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in long_functions(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not found, "split these functions:\n" + "\n".join(found)


def test_the_count_takes_a_function_from_its_decorator_to_its_last_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT - 2))
    at_limit = f"@decorator\ndef f():\n{body}\n"
    assert list(long_functions(at_limit, "m.py")) == []
    over = at_limit + "    y = 1\n"
    assert list(long_functions(over, "m.py")) == ["m.py:2 f (81 lines)"]
    nested = "class C:\n    async def g(self):\n" + "\n".join(f"        a{i} = {i}" for i in range(LIMIT))
    assert list(long_functions(nested, "m.py")) == ["m.py:2 g (81 lines)"]
