"""A sweep-file section checked from the record it becomes: its keys are the record's fields, its
defaults the fields' defaults, and each value is checked against the field's type (a Literal's
values, a bool, an integer or a number within the bounds the field's metadata gives, None where the
type allows it, a nested record). So a setting is written once, on its record, and the sweep file
follows it."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from .checks import ConfigError, check_keys, choice

LEAST, MOST = "least", "most"  # a field's bounds, in its metadata (results/spec.py, ``bounded``)


@functools.cache
def _hints(record: type) -> dict[str, Any]:
    return typing.get_type_hints(record, include_extras=False)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def section(
    raw: Any, record: type, path: str, *, handled: dict[str, Any] | None = None, skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``raw`` (a mapping, or None for all defaults) checked against ``record``'s fields but ``skip``,
    plus the ``handled`` keys the caller checks itself (name -> default): every field's value checked
    by its type, a nested record's as a section of its own. Returns every key's value."""
    handled = handled or {}
    own = [f for f in dataclasses.fields(record) if f.name not in skip and f.name not in handled]
    d = check_keys(raw or {}, {**{f.name: _default(f) for f in own}, **handled}, path)
    hints = _hints(record)
    for f in own:
        d[f.name] = value(d[f.name], hints[f.name], f"{path}.{f.name}", f.metadata)
    return d


def value(v: Any, tp: Any, key: str, meta: typing.Mapping[str, Any] = types.MappingProxyType({})) -> Any:
    """``v`` as a value of type ``tp`` (checked, a nested record built), or a ConfigError naming
    ``key``, the value and what is allowed."""
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return choice(v, typing.get_args(tp), key)
    if origin is typing.Union or origin is types.UnionType:
        options = typing.get_args(tp)
        if v is None and type(None) in options:
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return value(v, option, key, meta)
            except ConfigError:
                continue
        raise ConfigError(
            f"{key}={v!r}: expected {' or '.join(_said(o, meta) for o in options if o is not type(None))}"
        )
    # a hint is a class, never a record instance: ``isinstance`` lets the checker see tp as one
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return v if isinstance(v, tp) else tp(**section(v, tp, key))  # a default is a record already
    if tp is bool:
        if not isinstance(v, bool):
            raise ConfigError(f"{key}={v!r}: expected true or false")
        return v
    if tp in (int, float):
        ok = isinstance(v, int if tp is int else int | float) and not isinstance(v, bool)
        least, most = meta.get(LEAST), meta.get(MOST)
        if not ok or (least is not None and v < least) or (most is not None and v > most):
            raise ConfigError(f"{key}={v!r}: expected {_said(tp, meta)}")
        return tp(v)
    if tp is str:
        if not isinstance(v, str):
            raise ConfigError(f"{key}={v!r}: expected text")
        return v
    return v


def _said(tp: Any, meta: typing.Mapping[str, Any]) -> str:
    """What a value of ``tp`` is, in words."""
    if typing.get_origin(tp) is typing.Literal:
        return " or ".join(map(str, typing.get_args(tp)))
    noun = meta.get("said") or {int: "an integer", float: "a number", bool: "true or false", str: "text"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )
    least, most = meta.get(LEAST), meta.get(MOST)
    if least is not None and most is not None:
        return f"{noun} from {least:g} to {most:g}"
    if least is not None:
        return f"{noun} >= {least:g}"
    return noun
