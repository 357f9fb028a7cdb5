"""Checks for sweep-file values: each failure raises a ConfigError naming the key, the value and
what is allowed, so a mistake in a 200-line YAML (or a --set) points at its line."""

from __future__ import annotations

import re
from typing import Any

from iobench.host.units import parse_size


class ConfigError(ValueError):
    """A configuration value is wrong: names the key, the value, and what is allowed."""


def where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_keys(mapping: Any, allowed: dict[str, Any], path: str) -> dict:
    """``mapping`` with every allowed key (missing ones at their default); an unknown key is an error."""
    if not isinstance(mapping, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(mapping).__name__} {mapping!r}")
    unknown = sorted(set(mapping) - set(allowed), key=str)
    if unknown:
        raise ConfigError(
            f"{where(path, unknown[0])}: unknown key; allowed keys here are {', '.join(sorted(allowed))}"
        )
    return {k: mapping.get(k, default) for k, default in allowed.items()}


def choice(value: Any, allowed: tuple[str, ...], key: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r}: allowed values are {', '.join(allowed)}")
    return value


def integer(value: Any, key: str, minimum: int = 0, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key}={value!r}: expected an integer >= {minimum}")
    return value


def as_list(value: Any, key: str) -> list:
    """A sweep dimension: one value or a non-empty list of distinct values."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(f"{key}=[]: give at least one value")
    for i, v in enumerate(values):
        if v in values[:i]:
            raise ConfigError(f"{key}={value!r}: {v!r} is listed twice; each value makes its own cells")
    return values


def int_list(value: Any, key: str, minimum: int) -> list[int]:
    return [integer(v, f"{key}[{i}]", minimum) for i, v in enumerate(as_list(value, key))]  # type: ignore[misc]


def size(value: Any, key: str) -> int:
    try:
        return parse_size(value) if isinstance(value, str) else int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}={value!r}: {exc}; write a size like 400MB or 2GiB") from None


def slug(text: str) -> str:
    """Safe as one path component: cell ids and dataset directory names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)
