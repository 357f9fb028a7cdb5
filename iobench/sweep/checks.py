"""Checks for sweep-file values: each failure raises a ConfigError naming the key, the value and
what is allowed, so a mistake in a 200-line YAML (or a --set) points at its line."""

from __future__ import annotations

import difflib
import re
import urllib.parse
from typing import Any, Literal, TypeVar, overload

from iobench.host.units import parse_size

_Choice = TypeVar("_Choice", bound=str)


class ConfigError(ValueError):
    """A configuration value is wrong: names the key, the value, and what is allowed."""


def where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def did_you_mean(word: Any, known: Any) -> str:
    """``"; did you mean X?"`` for the known name closest to a misspelt ``word``, else ``""``: it
    ends a message, after the names allowed."""
    close = difflib.get_close_matches(str(word), [str(k) for k in known], n=1)
    return f"; did you mean {close[0]}?" if close else ""


def check_keys(mapping: Any, allowed: dict[str, Any], path: str) -> dict:
    """``mapping`` with every allowed key (missing ones at their default); an unknown key is an error."""
    if not isinstance(mapping, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(mapping).__name__} {mapping!r}")
    unknown = sorted(set(mapping) - set(allowed), key=str)
    if unknown:
        raise ConfigError(
            f"{where(path, unknown[0])}: unknown key; allowed keys here are {', '.join(sorted(allowed))}"
            + did_you_mean(unknown[0], allowed)
        )
    return {k: mapping.get(k, default) for k, default in allowed.items()}


def choice(value: Any, allowed: tuple[_Choice, ...], key: str) -> _Choice:
    if value not in allowed:
        raise ConfigError(
            f"{key}={value!r}: allowed values are {', '.join(allowed)}" + did_you_mean(value, allowed)
        )
    return value


@overload
def integer(value: Any, key: str, minimum: int = 0, optional: Literal[False] = False) -> int: ...


@overload
def integer(value: Any, key: str, minimum: int = 0, optional: bool = False) -> int | None: ...


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
    return [integer(v, f"{key}[{i}]", minimum) for i, v in enumerate(as_list(value, key))]


def size(value: Any, key: str) -> int:
    """Bytes in a size the sweep file gives: a YAML number is what its user wrote without a unit."""
    try:
        return parse_size(str(value))
    except ValueError as exc:
        raise ConfigError(f"{key}={value!r}: {exc}") from None


def url(value: Any, key: str) -> str:
    """A dataset's URL on a store, ``scheme://container/prefix``."""
    parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
    if parts is None or not (parts.scheme and parts.netloc):
        scheme, _, rest = str(value).partition(":")
        example = f"{scheme}://{rest.strip('/')}" if rest.strip("/") else "s3://bucket/prefix"
        raise ConfigError(f"{key}={value!r}: not a URL; write scheme://bucket/prefix, e.g. {example}")
    return value


def endpoint(value: Any, key: str) -> str:
    """A server's address, ``http(s)://host[:port]``: without its scheme a client cannot use it."""
    parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        bare = str(value).split("://", 1)[-1].strip("/") or "host:port"
        raise ConfigError(
            f"{key}={value!r}: not an endpoint URL; write its scheme and host, e.g. http://{bare} "
            f"(https://{bare} for TLS)"
        )
    try:
        parts.port  # noqa: B018  # a port that is not a number raises here
    except ValueError:
        raise ConfigError(
            f"{key}={value!r}: the port is not a number; e.g. http://{parts.hostname}:9000"
        ) from None
    return value


def slug(text: str) -> str:
    """Safe as one path component: cell ids and dataset directory names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)
