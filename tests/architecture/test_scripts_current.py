"""benchmarks/ and examples/ use the packages as they are today: every name they import from
``loaders`` and ``iobench`` (or from a sibling script: ``common``, ``peers``) exists, and every
attribute they read on a project module, class or record exists on it.

Nothing runs these scripts in the suite (a benchmark measures for minutes, many start the Ceph
lab), so a refactor that renames a name or drops an attribute left them broken unseen. This reads
them instead: imports resolve against the live packages; an attribute is checked where its owner's
type is known without running the script: a project module or class named in the script, a
variable (or ``self.x``) assigned the result of a project class or of a function or method whose
return annotation names a project class, a parameter annotated with one, and attributes of those
by their annotations. An attribute that exists only on a subclass counts as missing (the script
relies on more than the type it holds promises), and so does indexing a project record that
cannot be indexed (a typed summary read as the dict it once was). Their sweep files read as
today's sweep files.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import inspect
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.paths import ROOT

PROJECT = ("loaders", "iobench")
SCRIPTS = sorted(p for folder in ("benchmarks", "examples") for p in (ROOT / folder).rglob("*.py"))


@dataclass(frozen=True)
class Known:
    """What an expression is, as far as the check knows: an ``instance`` of a project class, or a
    project ``thing`` itself (a module, a class, a function)."""

    instance: type | None = None
    thing: Any = None


def _project(obj: Any) -> bool:
    name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    return isinstance(name, str) and name.split(".")[0] in PROJECT


def _resolve(module: str, name: str) -> Any:
    """``name`` from project ``module``: an attribute, else a submodule; AttributeError if neither."""
    owner = importlib.import_module(module)
    if hasattr(owner, name):
        return getattr(owner, name)
    try:
        return importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{module}.{name}":
            raise
        raise AttributeError(f"{module} has no {name!r}") from None


def _defined(path: Path) -> set[str]:
    """The names a sibling script defines or imports at its top level."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _class_of(hint: Any) -> type | None:
    """The one project class a type hint stands for (``X``, ``X | None``), else None."""
    if isinstance(hint, type):
        return hint if _project(hint) else None
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        classes = [a for a in typing.get_args(hint) if a is not type(None)]
        return _class_of(classes[0]) if len(classes) == 1 else None
    return None


@functools.cache
def _module_names(module: str) -> dict[str, Any]:
    """What a project module's annotations may name: its globals, and what it imports under
    TYPE_CHECKING or inside functions (resolved here, where they import)."""
    loaded = importlib.import_module(module)
    namespace = dict(vars(loaded))
    for node in ast.walk(ast.parse(inspect.getsource(loaded))):
        if isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), loaded.__package__)
            for alias in node.names:
                with contextlib.suppress(Exception):  # an optional extra not installed: not followed
                    namespace.setdefault(alias.asname or alias.name, _resolve(base, alias.name))
    return namespace


def _hints(obj: Any) -> dict[str, Any]:
    """``obj``'s annotations (a function's, or a class's and its bases'), each evaluated alone: one
    that cannot be (a name it never imports) is left out, the others still count."""
    owners = [k for k in reversed(obj.__mro__) if _project(k)] if isinstance(obj, type) else [obj]
    hints: dict[str, Any] = {}
    for owner in owners:
        module = getattr(owner, "__module__", None)
        if not isinstance(module, str):
            continue
        for key, raw in inspect.get_annotations(owner).items():
            try:
                hints[key] = eval(raw, _module_names(module)) if isinstance(raw, str) else raw
            except Exception:  # an annotation naming what it cannot import is not followed
                hints.pop(key, None)
    return hints


@functools.cache
def _self_assigned(cls: type) -> frozenset[str]:
    """The attributes a class's own methods assign on ``self``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return frozenset()
    return frozenset(
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and getattr(n.value, "id", "") == "self"
    )


def _has(cls: type, attr: str) -> bool:
    if hasattr(cls, attr) or hasattr(cls, "__getattr__"):
        return True
    return any(attr in vars(k).get("__annotations__", {}) or attr in _self_assigned(k) for k in cls.__mro__)


def _attribute(cls: type, attr: str) -> Known | None:
    """What ``instance.attr`` is: an annotated field's or a property's class, or a method."""
    member = inspect.getattr_static(cls, attr, None)
    if isinstance(member, property):
        found = _class_of(_hints(member.fget).get("return"))
        return Known(instance=found) if found else None
    if isinstance(member, staticmethod | classmethod) or inspect.isfunction(member):
        return Known(thing=getattr(cls, attr))
    found = _class_of(_hints(cls).get(attr))
    return Known(instance=found) if found else None


class ScriptCheck(ast.NodeVisitor):
    """One script's imports and attribute reads, each problem as ``path:line: what``."""

    def __init__(self, path: Path) -> None:
        self.path, self.problems = path, []
        self.names: dict[str, Known] = {}  # project things imported by the script, by local name
        self.scopes: list[dict[str, Known]] = [{}]  # variables (and self.x) known, innermost last

    def problem(self, node: ast.AST, what: str) -> None:
        where = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        self.problems.append(f"{where}:{getattr(node, 'lineno', 0)}: {what}")

    # -- imports ------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] in PROJECT:
                try:
                    module = importlib.import_module(alias.name)
                except ImportError as exc:
                    self.problem(node, f"import {alias.name}: {exc}")
                    continue
                local = alias.asname or alias.name.split(".")[0]
                self.names[local] = Known(thing=module if alias.asname else importlib.import_module(local))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        sibling = self.path.parent / f"{module}.py"
        if node.level == 0 and module.split(".")[0] in PROJECT:
            for alias in node.names:
                try:
                    self.names[alias.asname or alias.name] = Known(thing=_resolve(module, alias.name))
                except (ImportError, AttributeError) as exc:
                    self.problem(node, f"from {module} import {alias.name}: {exc}")
        elif node.level == 0 and sibling.exists():
            missing = sorted({a.name for a in node.names} - _defined(sibling))
            if missing:
                self.problem(
                    node, f"from {module} import {', '.join(missing)}: not defined in {sibling.name}"
                )

    # -- scopes -------------------------------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # self.x assigned in any method is known in every method (__init__ comes first, but not always)
        members: dict[str, Known] = {}
        for n in ast.walk(node):
            if (
                isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and self._dotted(n.targets[0]).startswith("self.")
            ):
                known = self.infer(n.value)
                if known is not None:
                    members[self._dotted(n.targets[0])] = known
        self.scopes.append({**self.scopes[-1], **members})
        self.generic_visit(node)
        self.scopes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        scope = dict(self.scopes[-1])
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            known = self.annotation(arg.annotation)
            if known is not None:
                scope[arg.arg] = known
        self.scopes.append(scope)
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If | ast.IfExp) -> None:
        # ``if isinstance(x, Class)``: x is a Class in the branch taken when it is one
        self.visit(node.test)
        narrowed = self._narrowed(node.test)
        if narrowed:
            self.scopes.append({**self.scopes[-1], **narrowed})
        for part in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(part)
        if narrowed:
            self.scopes.pop()
        for part in node.orelse if isinstance(node.orelse, list) else [node.orelse]:
            self.visit(part)

    visit_IfExp = visit_If

    def _narrowed(self, test: ast.expr) -> dict[str, Known]:
        if not (
            isinstance(test, ast.Call)
            and getattr(test.func, "id", "") == "isinstance"
            and len(test.args) == 2
        ):
            return {}
        name, cls = self._dotted(test.args[0]), self.infer(test.args[1])
        if name and cls is not None and isinstance(cls.thing, type) and _project(cls.thing):
            return {name: Known(instance=cls.thing)}
        return {}

    def visit_Call(self, node: ast.Call) -> None:
        # a dict given where a project function expects one of its records (a spec read as a mapping)
        func = self.infer(node.func)
        target = func.thing if func is not None else None
        if (
            callable(target)
            and not isinstance(target, type)
            and _project(target)
            and not self._unpacked(node)
        ):
            keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
            try:
                given = inspect.signature(target).bind_partial(*node.args, **keywords).arguments
            except (TypeError, ValueError):
                given = {}
            hints = _hints(target)
            for parameter, value in given.items():
                expected = _class_of(hints.get(parameter))
                known = self.infer(value) if isinstance(value, ast.expr) else None
                if expected is not None and known is not None and known.thing is dict:
                    self.problem(
                        node,
                        f"{target.__qualname__}({parameter}=...) takes a {expected.__qualname__}, given a dict",
                    )
        self.generic_visit(node)

    @staticmethod
    def _unpacked(node: ast.Call) -> bool:
        return any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        known = self.infer(node.value)
        for target in node.targets:
            if isinstance(target, ast.Subscript) and self._dotted(target.value) and known is not None:
                self.scopes[-1][self._dotted(target.value) + "[]"] = known  # a dict or list of them
                continue
            name = self._dotted(target)
            if name:
                if known is None:
                    self.scopes[-1].pop(name, None)
                else:
                    self.scopes[-1][name] = known

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        name = self._dotted(node.target)
        known = self.annotation(node.annotation)
        if name and known is not None:
            self.scopes[-1][name] = known

    # -- reads --------------------------------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.infer(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        owner = self.infer(node.value)
        if owner is not None and owner.instance is not None and not hasattr(owner.instance, "__getitem__"):
            self.problem(node, f"{owner.instance.__qualname__} cannot be indexed (read its attributes)")
        self.generic_visit(node)

    def infer(self, node: ast.expr) -> Known | None:
        """What ``node`` is, where the script says it; an attribute read on it is checked on the way."""
        name = self._dotted(node)
        if name and name in self.scopes[-1]:
            return self.scopes[-1][name]
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Dict) or (
            isinstance(node, ast.Call) and getattr(node.func, "id", "") == "dict"
        ):
            return Known(thing=dict)
        if isinstance(node, ast.Subscript):
            return self.scopes[-1].get(self._dotted(node.value) + "[]") if self._dotted(node.value) else None
        if isinstance(node, ast.Call):
            return self._called(self.infer(node.func))
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            return self._read(node, self.infer(node.value))
        return None

    def _read(self, node: ast.Attribute, owner: Known | None) -> Known | None:
        if owner is None:
            return None
        if owner.instance is not None:
            if not _has(owner.instance, node.attr):
                self.problem(node, f"{owner.instance.__qualname__} has no attribute {node.attr!r}")
                return None
            return _attribute(owner.instance, node.attr)
        thing = owner.thing
        if _project(thing) and isinstance(thing, type | types.ModuleType) and not hasattr(thing, node.attr):
            self.problem(
                node, f"{getattr(thing, '__qualname__', thing.__name__)} has no attribute {node.attr!r}"
            )
            return None
        value = getattr(thing, node.attr, None)
        return Known(thing=value) if _project(value) else None

    @staticmethod
    def _called(func: Known | None) -> Known | None:
        if func is None or func.thing is None:
            return None
        if isinstance(func.thing, type):
            return Known(instance=func.thing) if _project(func.thing) else None
        found = _class_of(_hints(func.thing).get("return")) if callable(func.thing) else None
        return Known(instance=found) if found else None

    def annotation(self, node: ast.expr | None) -> Known | None:
        """A parameter's or variable's annotation naming a project class (``X``, ``X | None``)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node = ast.parse(node.value, mode="eval").body
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            sides = [
                s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)
            ]
            node = sides[0] if len(sides) == 1 else None
        known = self.infer(node) if isinstance(node, ast.Name | ast.Attribute) else None
        if known is not None and isinstance(known.thing, type) and _project(known.thing):
            return Known(instance=known.thing)
        return None

    @staticmethod
    def _dotted(node: ast.AST) -> str:
        """``a`` or ``a.b.c`` for a plain name or chain of attributes on one, else ""."""
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            head = ScriptCheck._dotted(node.value)
            return f"{head}.{node.attr}" if head else ""
        return ""


def problems_of(path: Path) -> list[str]:
    check = ScriptCheck(path)
    check.visit(ast.parse(path.read_text(), str(path)))
    return list(dict.fromkeys(check.problems))  # a chain's reads are met more than once


def test_there_are_scripts_to_check() -> None:
    assert len(SCRIPTS) > 20 and any(p.parent.name == "probe" for p in SCRIPTS)


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_script_uses_names_that_exist(path: Path) -> None:
    problems = problems_of(path)
    assert not problems, "names and attributes that no longer exist:\n" + "\n".join(problems)


SWEEP_FILES = sorted(p for folder in ("benchmarks", "examples") for p in (ROOT / folder).rglob("*.yaml"))


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_sweep_file_reads_as_today_s_sweep_file(path: Path) -> None:
    from iobench.sweep.config import load_config

    assert load_config(path).tiers  # a key renamed or removed since is a clear error here


# each a break of the kind refactors left in the scripts, and what the check says of it
BROKEN = {
    "from loaders.pipeline.samples import read_shards": "has no 'read_shards'",
    "import loaders.pipeline.gone": "No module named",
    "from loaders import make_loader\nmake_loader('torch', None)._loader": "Loader has no attribute '_loader'",
    "from iobench.tiers import make_tier\ntier = make_tier({})\ntier.cache_dir": "Tier has no attribute 'cache_dir'",
    "import iobench.tiers as t\nt.make_tiers": "has no attribute 'make_tiers'",
    "from iobench.cell.entry.process import run_cell\nrun_cell({'cell_id': 'x'}, None)": "given a dict",
    "from iobench.results.summary import CellSummary\ndef f(s: CellSummary):\n    return s.ceilings.fetc": (
        "Ceilings has no attribute 'fetc'"
    ),
    "from iobench.results.summary import CellSummary\ndef f(s: 'CellSummary | None'):\n    return s['verdict']": (
        "CellSummary cannot be indexed"
    ),
    "from loaders import make_loader\nclass C:\n    def __init__(self):\n        self.l = make_loader('t', None)\n"
    "    def f(self):\n        return self.l.backend": "Loader has no attribute 'backend'",
    "from common import gone": "not defined in common.py",
}
CURRENT = """
from common import helper
from loaders import LoaderConfig, ShardLoader, make_loader
from iobench.tiers import make_tier

config = LoaderConfig()
config.pipeline.augment.size
loader = make_loader("torch", config)
workers = loader._loader if isinstance(loader, ShardLoader) else None
make_tier({}).client_cache()
"""


@pytest.mark.parametrize("script", BROKEN, ids=range(len(BROKEN)))
def test_each_kind_of_break_is_caught(tmp_path: Path, script: str) -> None:
    (tmp_path / "common.py").write_text("def helper():\n    pass\n")
    (tmp_path / "bench.py").write_text(script + "\n")
    problems = problems_of(tmp_path / "bench.py")
    assert len(problems) == 1 and BROKEN[script] in problems[0], problems


def test_what_exists_passes(tmp_path: Path) -> None:
    (tmp_path / "common.py").write_text("def helper():\n    pass\n")
    (tmp_path / "bench.py").write_text(CURRENT)
    assert problems_of(tmp_path / "bench.py") == []
