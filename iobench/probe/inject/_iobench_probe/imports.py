"""Run a function when a module is first imported, without importing it ourselves: the hooks for
torch are installed when the job imports torch, DALI's when it imports DALI, and a job that
imports neither pays nothing. A finder placed first on ``sys.meta_path`` asks the other finders for
the module's spec and wraps its loader's ``exec_module``."""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

Hook = Callable[[ModuleType], None]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, hooks: list[Hook]) -> None:
        self.inner = inner
        self.hooks = hooks

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        for hook in self.hooks:
            hook(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.hooks: dict[str, list[Hook]] = {}
        self._busy: set[str] = set()

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in self.hooks or name in self._busy:
            return None
        self._busy.add(name)
        spec = None
        try:
            for finder in sys.meta_path:  # the others, in their order
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        finally:
            self._busy.discard(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, self.hooks.pop(name))
        return spec


_FINDER = _Finder()


def when_imported(name: str, hook: Hook) -> None:
    """``hook(module)`` once ``name`` has been imported: now if it already is, else right after."""
    module = sys.modules.get(name)
    if module is not None:
        hook(module)
        return
    _FINDER.hooks.setdefault(name, []).append(hook)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
