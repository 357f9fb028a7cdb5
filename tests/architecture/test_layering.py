"""The import rules of docs/architecture.md, read from its ``layers`` block: no import cycle among
the modules, no import from a lower layer up, loaders never importing iobench, and the loader
registry and settings importable without torch.

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

from tests.helpers.paths import ROOT

ARCHITECTURE = ROOT / "docs" / "architecture.md"


def layers() -> dict[str, int]:
    """Package -> layer number, from the fenced ``layers`` block of docs/architecture.md."""
    block = re.search(r"```layers\n(.*?)```", ARCHITECTURE.read_text(), re.S)
    assert block, f"{ARCHITECTURE} has no ```layers block"
    return {pkg: i for i, line in enumerate(block.group(1).split("\n")) for pkg in line.split()}


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
