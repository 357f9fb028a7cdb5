"""Lazy package faces (PEP 562): a package lists the names it offers and the submodule that defines
each, and a submodule is imported only when one of its names is first asked for. So ``import
loaders.storage`` costs nothing, and ``from loaders.storage import ThrottleSpec`` imports neither
fsspec nor torch: a sweep file is checked before anything heavy loads."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_face(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``; ``exports`` maps each name to the submodule,
    relative to the package, that defines it."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)  # the next access is a plain lookup
        return value

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[package]), *exports])

    return __getattr__, __dir__
