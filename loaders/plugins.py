"""Plugins by name: the one registry design for storage tiers, loader backends and object clients,
and the one resolver of ``"module:attribute"`` import strings (fsspec's registry table and its
resolver are the model).

A registry holds its built-ins as import strings, imported on first use, so asking what is
registered imports nothing and a missing optional dependency fails only when that plugin is used,
with its install hint. Plugins of other packages are registered in code or found through an
entry-point group, read on every look-up (one installed after import still shows up).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar


def resolve_import(target: str, *, what: str, hint: str = "", package: str | None = None) -> Any:
    """The object ``target`` (``"module:attr.path"``; a module relative to ``package`` where it
    starts with a dot) names. ImportError names ``what`` failed to load, why, and ``hint``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{what}: {target!r} is not an import string ('package.module:name')")
    advice = f"; {hint}" if hint else ""
    try:
        obj: Any = importlib.import_module(module_name, package)
    except ImportError as exc:
        raise ImportError(
            f"{what} could not be loaded: importing {module_name!r} failed ({exc}){advice}"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(
                f"{what}: {module_name!r} has no attribute {attr!r} (target {target!r})"
            ) from None
    return obj


@dataclass(frozen=True)
class Entry:
    """One plugin: its name, what it is (an import string until first used) and how to install what
    it needs. Registries of richer entries subclass it."""

    name: str
    target: Any  # "module:attribute", or the object itself
    install_hint: str = ""


E = TypeVar("E", bound=Entry)


class Registry(Generic[E]):
    """Plugins of one kind by name: built-ins, registered ones, and an entry-point group's."""

    def __init__(
        self,
        kind: str,
        builtins: Iterable[E],
        *,
        group: str | None,
        from_entry_point: Callable[[str, Any], E],
        accepts: Callable[[Any], bool] = lambda _: True,
        must_be: str = "",
    ) -> None:
        """``kind`` names the plugins in messages ("tier", "loader"); ``from_entry_point(name, obj)``
        makes an entry of what an entry point loads; ``accepts(obj)`` is True for what a plugin may
        resolve to (``must_be`` says what, when it is not)."""
        self.kind, self.group = kind, group
        self._builtins = {e.name: e for e in builtins}
        self._registered: dict[str, E] = {}
        self._from_entry_point, self._accepts, self._must_be = from_entry_point, accepts, must_be

    def _entry_points(self) -> dict[str, Any]:
        return {ep.name: ep for ep in entry_points(group=self.group)} if self.group else {}

    def names(self) -> list[str]:
        """Every name a look-up accepts (a built-in whose dependency is missing included)."""
        return sorted(set(self._builtins) | set(self._registered) | set(self._entry_points()))

    def known(self) -> dict[str, E]:
        """The built-in and registered entries by name (entry points are loaded only when asked for)."""
        return {**self._builtins, **self._registered}

    def register(self, entry: E, *, clobber: bool = True) -> None:
        """Add ``entry`` (or replace the one of its name, unless ``clobber`` is False)."""
        if not isinstance(entry.name, str) or not entry.name:
            raise ValueError(f"{self.kind} name must be a non-empty string, got {entry.name!r}")
        if isinstance(entry.target, str):
            module, sep, attr = entry.target.partition(":")
            if not (module and sep and attr):
                raise ValueError(f"{self.kind} target {entry.target!r} must look like 'package.module:Name'")
        elif not self._accepts(entry.target):
            raise TypeError(f"{self.kind} {entry.name!r} must be {self._must_be} or an import string")
        existing = self._registered.get(entry.name) or self._builtins.get(entry.name)
        if existing is not None and existing.target != entry.target and not clobber:
            raise ValueError(
                f"{self.kind} {entry.name!r} is already registered to {_target_name(existing.target)}; "
                "pass clobber=True to replace it"
            )
        self._registered[entry.name] = entry

    def entry(self, name: str) -> E:
        """The entry called ``name``; ValueError lists the known names."""
        found = self._registered.get(name) or self._builtins.get(name)
        if found is not None:
            return found
        ep = self._entry_points().get(name)
        if ep is None:
            raise ValueError(
                f"unknown {self.kind} {name!r}; known {self.kind}s are {', '.join(self.names())}"
            )
        try:
            obj = ep.load()
        except ImportError as exc:
            raise ImportError(
                f"{self.kind} {name!r} (entry point {ep.value!r} in group {self.group!r}) could not be loaded: {exc}"
            ) from exc
        found = self._from_entry_point(name, obj)
        self._registered[name] = found
        return found

    def load(self, name: str) -> Any:
        """What ``name`` resolves to, imported on first use and kept (TypeError when it is not what a
        plugin of this kind must be)."""
        entry = self.entry(name)
        obj = entry.target
        if isinstance(obj, str):
            obj = resolve_import(obj, what=f"{self.kind} {name!r}", hint=entry.install_hint)
        if not self._accepts(obj):
            raise TypeError(f"{self.kind} {name!r} resolved to {obj!r}, which is not {self._must_be}")
        if entry.target is not obj:
            self._registered[name] = replace(entry, target=obj)
        return obj


def _target_name(target: Any) -> str:
    return target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}"
