"""The import rules of docs/architecture.md, read from its ``layers`` blocks: no import cycle among
the modules, no import from a lower layer up (between iobench's packages, and between the groups
inside a package that has a block of its own: ```layers iobench.cell), loaders never importing
iobench, and the loader registry and settings importable without torch.

Every import counts, inside functions and under TYPE_CHECKING too: a lazy import is still a
dependency, and one that points up the layers is still a cycle waiting to happen.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def layer_lines(scope: str = "") -> list[list[str]]:
    """The fenced ``layers`` block of docs/architecture.md, lowest line first: iobench's packages;
    with a ``scope`` (a package: ``iobench.cell``), that package's own block of its groups, each one
    of its modules or subpackages."""
    fence = f"```layers {scope}\n" if scope else "```layers\n"
    block = re.search(re.escape(fence) + r"(.*?)```", ARCHITECTURE.read_text(), re.S)
    assert block, f"{ARCHITECTURE} has no {fence.strip()} block"
    return [line.split() for line in block.group(1).split("\n")]


def layers(scope: str = "") -> dict[str, int]:
    """Package (or a scope's group) -> layer number."""
    return {name: i for i, line in enumerate(layer_lines(scope)) for name in line}


def scopes() -> list[str]:
    """The packages whose groups have a ``layers`` block of their own."""
    return re.findall(r"```layers (\S+)\n", ARCHITECTURE.read_text())


def group_of(module: str, scope: str) -> str | None:
    """The group of ``module`` inside package ``scope``: the module or subpackage of ``scope`` it is
    or lies in; None outside ``scope`` (and for the package's own ``__init__``)."""
    if not module.startswith(f"{scope}."):
        return None
    return module.removeprefix(f"{scope}.").split(".")[0]


def upward_inside(graph: dict[str, set[str]], scope: str, rank: dict[str, int]) -> list[str]:
    """Imports between the groups of ``scope`` that do not run down its layers: up, or sideways
    between groups on one line."""
    upward = []
    for module, targets in graph.items():
        a = group_of(module, scope)
        for target in targets:
            b = group_of(target, scope)
            if a is None or b is None or a == b:
                continue
            if rank[b] >= rank[a]:
                upward.append(f"{module} ({a}, layer {rank[a]}) -> {target} ({b}, layer {rank[b]})")
    return upward


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of iobench and loaders it imports (resolved to real modules)."""
    files = {_module(p): p for top in ("iobench", "loaders") for p in (ROOT / top).rglob("*.py")}
    # a compiled extension (its C source where its module goes) imports nothing of ours
    compiled = {_module(p) for top in ("iobench", "loaders") for p in (ROOT / top).rglob("*.c")}

    def resolve(name: str) -> str | None:
        while name and name not in files and name not in compiled:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for target in targets:
                found = resolve(target)
                if found and found != module:
                    graph[module].add(found)
    return graph


def _package(module: str) -> str:
    parts = module.split(".")
    return "loaders" if parts[0] == "loaders" else (parts[1] if len(parts) > 1 else "iobench")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_the_layers_name_every_package_of_iobench():
    packages = {p.name for p in (ROOT / "iobench").iterdir() if (p / "__init__.py").exists()}
    assert packages | {"cli"} == set(layers())


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_import_from_a_lower_layer_up():
    rank = layers()
    upward = []
    for module, targets in import_graph().items():
        a = _package(module)
        for target in targets:
            b = _package(target)
            if a == b or b in ("loaders", "iobench"):
                continue
            if a == "loaders":
                upward.append(f"{module} -> {target} (loaders must not import iobench)")
            elif rank[b] >= rank[a]:
                upward.append(f"{module} ({a}, layer {rank[a]}) -> {target} ({b}, layer {rank[b]})")
    assert upward == []


def test_cell_has_its_layers():
    assert "iobench.cell" in scopes()


@pytest.mark.parametrize("scope", scopes())
def test_a_packages_layers_name_each_of_its_modules_and_subpackages_once(scope):
    folder = ROOT.joinpath(*scope.split("."))
    groups = [
        p.stem if p.is_file() else p.name
        for p in folder.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()
    ]
    named = [name for line in layer_lines(scope) for name in line]
    assert sorted(named) == sorted(set(named)) == sorted(groups)


@pytest.mark.parametrize("scope", scopes())
def test_no_import_from_a_lower_group_up_inside_a_package(scope):
    assert upward_inside(import_graph(), scope, layers(scope)) == []


# what iobench may import of loaders: the top-level modules and the subpackages' faces (their __all__)
SUBPACKAGE_FACES = {f"loaders.{face}" for face in ("storage", "formats", "pipeline", "backends", "observe")}
LOADER_FACES = {
    "loaders",
    "loaders.config",
    "loaders.contract",
    "loaders.options",
    "loaders.plan",
    "loaders.plugins",
    "loaders.registry",
}
LOADER_FACES |= SUBPACKAGE_FACES


def test_iobench_reaches_loaders_only_through_their_faces():
    deep = [
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        if module.startswith("iobench")
        for target in targets
        if target.startswith("loaders") and target not in LOADER_FACES
    ]
    assert deep == []


def test_every_name_iobench_takes_from_a_face_is_in_its_all():
    import importlib

    missing = []
    for path in (ROOT / "iobench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module in SUBPACKAGE_FACES:
                face = importlib.import_module(node.module)
                exported = getattr(face, "__all__", None)
                for alias in node.names:
                    if exported is not None and alias.name not in exported:
                        missing.append(f"{path.relative_to(ROOT)}: {node.module}.{alias.name}")
    assert missing == []
    for face in sorted(SUBPACKAGE_FACES):
        module = importlib.import_module(face)
        assert all(hasattr(module, name) for name in getattr(module, "__all__", ())), face


def test_the_rules_catch_what_they_forbid():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    rank = layers()
    assert rank["host"] < rank["results"] < rank["analysis"] < rank["cell"] < rank["sweep"] < rank["cli"]
    inside = {"low": 0, "side": 1, "beside": 1, "high": 2}
    graph = {
        "p.high.a": {"p.low", "p.high.b"},
        "p.low": {"p.high.a"},
        "p.side": {"p.beside"},
        "q.x": {"p.high.a"},
    }
    assert upward_inside(graph, "p", inside) == [
        "p.low (low, layer 0) -> p.high.a (high, layer 2)",
        "p.side (side, layer 1) -> p.beside (beside, layer 1)",
    ]
    cell = layers("iobench.cell")
    assert (
        cell["records"] < cell["ranks"] < cell["steps"] < cell["measure"] < cell["diagnosis"] < cell["entry"]
    )


def test_the_registry_settings_storage_and_formats_import_without_torch():
    code = (
        "import sys, loaders.registry, loaders.config, loaders.options, iobench.sweep.config\n"
        "from loaders import LoaderConfig, available_loaders, make_loader\n"
        "from loaders.storage import ShardSource, ThrottleSpec, ObjectReader, ShardCache\n"
        "from loaders.formats import iter_samples, iter_parquet_samples, read_objects\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))[:5]\n"
        "print(available_loaders())"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "'torch'" in proc.stdout and "'dali'" in proc.stdout
