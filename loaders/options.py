"""Declared options of a plugin (a loader backend here, a storage tier in iobench): each key's
type, default and help, so a typo or a wrong type is refused with the allowed keys named, never
silently ignored (an ignored key would quietly benchmark the wrong thing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class OptionError(ValueError):
    """An option is unknown, of the wrong type or missing; names the key, the value and what is allowed."""


@dataclass(frozen=True)
class Option:
    """One configuration key a plugin accepts."""

    types: type | tuple[type, ...]
    required: bool = False
    default: Any = None
    help: str = ""
    choices: tuple = ()  # when not empty: the only values allowed


def _type_names(types: type | tuple[type, ...]) -> str:
    seq = types if isinstance(types, tuple) else (types,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in seq)


def check_options(
    owner: str,
    declared: Mapping[str, Option],
    given: Mapping[str, Any],
    error: type[ValueError] = OptionError,
) -> dict[str, Any]:
    """``given`` checked against ``declared``, with every default filled in; ``owner`` (e.g.
    "loader 'nodes'") starts each message. No side effects: a sweep checks everything up front."""
    for key, value in given.items():
        if key not in declared:
            raise error(
                f"{owner}: unknown option {key!r} (value {value!r}); "
                f"allowed options: {', '.join(sorted(declared)) or 'none'}"
            )
        spec = declared[key]
        # bool is an int subclass; a flag given as 1 is fine, a size given as True is not.
        bad_bool = isinstance(value, bool) and bool not in (
            spec.types if isinstance(spec.types, tuple) else (spec.types,)
        )
        if not isinstance(value, spec.types) or bad_bool:
            raise error(
                f"{owner}: option {key!r} has value {value!r} of type {type(value).__name__}; "
                f"expected {_type_names(spec.types)}" + (f" ({spec.help})" if spec.help else "")
            )
        if spec.choices and value not in spec.choices:
            raise error(
                f"{owner}: option {key!r}={value!r}: allowed values are {', '.join(map(str, spec.choices))}"
            )
    missing = [k for k, s in declared.items() if s.required and k not in given]
    if missing:
        details = "; ".join(f"{k}: {declared[k].help}" if declared[k].help else k for k in missing)
        raise error(f"{owner}: missing required option(s): {details}")
    return {k: given.get(k, s.default) for k, s in declared.items()}
