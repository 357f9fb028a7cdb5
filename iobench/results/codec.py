"""Typed records to JSON and back: the one way summary.json, manifest.json and cells.json are read.

``to_json`` turns a (nested) frozen dataclass into plain JSON values. ``from_json`` builds the
dataclass back from its type hints: a key the record does not know is ignored (a file written by a
newer version still loads), a missing key takes the field's default (a file written by an older
schema still loads), and a missing key without a default is an error naming the record and key.
A record with a flat form of its own (``as_flat`` and the class method ``from_flat``: the loader's
counters, loaders.observe.counters) is written and read through it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


class RecordError(ValueError):
    """A JSON document does not fit the record it should be: names the record, the key and the value."""


def to_json(value: Any, *, finite: bool = False) -> Any:
    """Plain JSON values (dicts, lists, numbers, strings, None) for a record, recursively: its
    fields, then the properties its class names in ``JSON_DERIVED`` (written for readers, ignored when
    read back). ``finite``: infinities and NaN as None (strict JSON, for documents other programs read)."""
    if hasattr(value, "as_flat") and not isinstance(value, type):
        return to_json(value.as_flat(), finite=finite)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)] + list(getattr(type(value), "JSON_DERIVED", ()))
        return {name: to_json(getattr(value, name), finite=finite) for name in names}
    if isinstance(value, dict):
        return {str(k): to_json(v, finite=finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v, finite=finite) for v in value]
    if finite and isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_json(cls: type[T], data: Any, where: str = "") -> T:
    """``data`` (parsed JSON) as an instance of the record type ``cls``."""
    return _build(cls, data, where or cls.__name__)


def _build(tp: Any, data: Any, where: str) -> Any:
    if tp is Any or tp is object:
        return data
    if isinstance(tp, typing.NewType):  # a name checked where it is made (loaders.storage.PluginClientName)
        return _build(tp.__supertype__, data, where)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if data not in allowed:
            raise RecordError(f"{where}: {data!r} is not one of {', '.join(map(repr, allowed))}")
        return data
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        last: RecordError | None = None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _build(arg, data, where)
            except RecordError as exc:
                last = exc
        raise last or RecordError(f"{where}: {data!r} fits none of {tp}")
    if origin in (list, tuple):
        if not isinstance(data, list | tuple):
            raise RecordError(f"{where}: expected a list, got {type(data).__name__} {data!r:.80}")
        args = typing.get_args(tp)
        item = args[0] if args else Any
        built = [_build(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
        return tuple(built) if origin is tuple else built
    if origin is dict:
        if not isinstance(data, dict):
            raise RecordError(f"{where}: expected a mapping, got {type(data).__name__} {data!r:.80}")
        _, value_type = typing.get_args(tp) or (str, Any)
        return {k: _build(value_type, v, f"{where}.{k}") for k, v in data.items()}
    if hasattr(tp, "from_flat"):
        if not isinstance(data, dict):
            raise RecordError(f"{where}: expected a mapping for {tp.__name__}, got {data!r:.80}")
        try:
            return tp.from_flat(data)
        except ValueError as exc:
            raise RecordError(f"{where}: {exc}") from None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a record's class, not one of its values
        if not isinstance(data, dict):
            raise RecordError(f"{where}: expected a mapping for {tp.__name__}, got {data!r:.80}")
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = _build(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"{where}: missing key {f.name!r} ({tp.__name__} needs it)")
        return tp(**kwargs)
    if tp is float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            raise RecordError(f"{where}: expected a number, got {data!r:.80}")
        return float(data)
    if tp is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise RecordError(f"{where}: expected an integer, got {data!r:.80}")
        return data
    if tp in (str, bool):
        if not isinstance(data, tp):
            raise RecordError(f"{where}: expected {tp.__name__}, got {data!r:.80}")
        return data
    if tp is type(None):
        if data is not None:
            raise RecordError(f"{where}: expected null, got {data!r:.80}")
        return None
    raise TypeError(f"{where}: no JSON decoding for type {tp!r}")
