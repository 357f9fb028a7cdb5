"""Storage tiers, registered by name (fsspec-style).

Built-ins are import strings so that ``import iobench.tiers`` never pulls in boto3, librados
and friends; a missing dependency surfaces only when that tier is used, with its install hint.
Third-party tiers register through the ``iobench.tiers`` entry-point group::

    [project.entry-points."iobench.tiers"]
    mytier = "mypkg.tier:MyTier"
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from iobench.tiers.base import CacheState, Option, Tier, TierConfigError

__all__ = [
    "ENTRY_POINT_GROUP",
    "CacheState",
    "Option",
    "Tier",
    "TierConfigError",
    "available_tiers",
    "get_tier_class",
    "make_tier",
    "register_tier",
]

ENTRY_POINT_GROUP = "iobench.tiers"


@dataclass
class _Entry:
    target: str | type[Tier]
    install_hint: str | None = None


_REGISTRY: dict[str, _Entry] = {
    "local": _Entry("iobench.tiers.local:LocalTier"),
    "s3": _Entry("iobench.tiers.s3:S3Tier", "pip install 'iobench' (s3fs and boto3 are core dependencies)"),
    "cephfs": _Entry("iobench.tiers.cephfs:CephFSTier", "mount CephFS first (apt-get install ceph-fuse)"),
    "rados": _Entry(
        "iobench.tiers.rados:RadosTier", "apt-get install python3-rados (and see iobench.ceph.client)"
    ),
    "throttled": _Entry("iobench.tiers.throttled:ThrottledTier"),
}


def register_tier(
    name: str,
    target: str | type[Tier],
    *,
    install_hint: str | None = None,
    clobber: bool = False,
) -> None:
    """Register `target` (a Tier subclass or "module:Class") under `name`."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"tier name must be a non-empty string, got {name!r}")
    if isinstance(target, str):
        if ":" not in target:
            raise ValueError(f"tier target {target!r} must look like 'package.module:ClassName'")
    elif not (isinstance(target, type) and issubclass(target, Tier)):
        raise TypeError(f"tier target for {name!r} must be a Tier subclass or an import string")
    existing = _REGISTRY.get(name)
    if existing is not None and existing.target != target and not clobber:
        raise ValueError(
            f"tier {name!r} is already registered to {_target_name(existing.target)}; "
            "pass clobber=True to replace it"
        )
    _REGISTRY[name] = _Entry(target, install_hint)


def _target_name(target: str | type) -> str:
    return target if isinstance(target, str) else f"{target.__module__}:{target.__qualname__}"


def _entry_points() -> dict[str, EntryPoint]:
    # Read on every lookup rather than cached: plugins installed after import still show up,
    # and a lookup miss is rare enough that the cost does not matter.
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_tiers() -> list[str]:
    """Names usable as a tier `kind`: built-ins, registered ones and entry points."""
    return sorted(set(_REGISTRY) | set(_entry_points()))


def _import_string(name: str, target: str, hint: str | None) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        advice = f"; {hint}" if hint else ""
        raise ImportError(
            f"tier {name!r} could not be loaded: importing {module_name!r} failed ({exc}){advice}"
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(
                f"tier {name!r}: {module_name!r} has no attribute {attr!r} (target {target!r})"
            ) from None
    return obj


def get_tier_class(name: str) -> type[Tier]:
    """The Tier subclass registered as `name`; ValueError lists the known names."""
    entry = _REGISTRY.get(name)
    if entry is not None:
        target = entry.target
        cls = _import_string(name, target, entry.install_hint) if isinstance(target, str) else target
    else:
        ep = _entry_points().get(name)
        if ep is None:
            raise ValueError(f"unknown tier {name!r}; known tiers: {', '.join(available_tiers())}")
        try:
            cls = ep.load()
        except ImportError as exc:
            raise ImportError(
                f"tier {name!r} (entry point {ep.value!r} in group {ENTRY_POINT_GROUP!r}) "
                f"could not be loaded: {exc}"
            ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Tier)):
        raise TypeError(f"tier {name!r} resolved to {cls!r}, which is not a Tier subclass")
    # Cache the resolved class so later lookups skip the import machinery.
    hint = entry.install_hint if entry is not None else None
    _REGISTRY[name] = _Entry(cls, hint)
    return cls


def make_tier(spec: Mapping[str, Any]) -> Tier:
    """Build a tier from a config mapping such as {"kind": "local", "path": "/data/in1k"}."""
    cls, options = _resolve(spec)
    return cls(**options)


def check_tier_spec(spec: Mapping[str, Any]) -> None:
    """Validate a tier config mapping (kind and options) without building the tier."""
    cls, options = _resolve(spec)
    cls.check_options(options)


def _resolve(spec: Mapping[str, Any]) -> tuple[type[Tier], dict[str, Any]]:
    if not isinstance(spec, Mapping):
        raise TierConfigError(
            f"a tier config must be a mapping with a 'kind' key, got {type(spec).__name__}: {spec!r}"
        )
    if "kind" not in spec:
        raise TierConfigError(
            f"tier config {dict(spec)!r} has no 'kind'; allowed kinds: {', '.join(available_tiers())}"
        )
    kind = spec["kind"]
    if not isinstance(kind, str):
        raise TierConfigError(f"tier 'kind' must be a string, got {kind!r}")
    try:
        cls = get_tier_class(kind)
    except ValueError as exc:
        raise TierConfigError(str(exc)) from None
    options = {k: v for k, v in spec.items() if k != "kind"}
    non_str = [k for k in options if not isinstance(k, str)]
    if non_str:
        raise TierConfigError(f"tier {kind!r}: option names must be strings, got {non_str[0]!r}")
    return cls, options
