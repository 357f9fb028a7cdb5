"""Storage tiers, registered by name (fsspec-style).

Built-ins are import strings so that ``import iobench.tiers`` never pulls in boto3, librados
and friends; a missing dependency surfaces only when that tier is used, with its install hint.
Third-party tiers register through the ``iobench.tiers`` entry-point group::

    [project.entry-points."iobench.tiers"]
    mytier = "mypkg.tier:MyTier"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from iobench.tiers.base import CacheState, Option, Tier, TierConfigError
from loaders.plugins import Entry, Registry

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


def _tier_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, Tier)


TIERS: Registry[Entry] = Registry(
    "tier",
    (
        Entry("local", "iobench.tiers.local:LocalTier"),
        Entry(
            "s3", "iobench.tiers.s3:S3Tier", "pip install 'iobench' (s3fs and boto3 are core dependencies)"
        ),
        Entry("cephfs", "iobench.tiers.cephfs:CephFSTier", "mount CephFS first (apt-get install ceph-fuse)"),
        Entry(
            "rados",
            "iobench.tiers.rados:RadosTier",
            "apt-get install python3-rados (and see iobench.ceph.client)",
        ),
        Entry("throttled", "iobench.tiers.throttled:ThrottledTier"),
    ),
    group=ENTRY_POINT_GROUP,
    from_entry_point=lambda name, cls: Entry(name, cls),
    accepts=_tier_class,
    must_be="a Tier subclass",
)


def register_tier(
    name: str,
    target: str | type[Tier],
    *,
    install_hint: str | None = None,
    clobber: bool = False,
) -> None:
    """Register ``target`` (a Tier subclass or "module:Class") under ``name``."""
    TIERS.register(Entry(name, target, install_hint or ""), clobber=clobber)


def available_tiers() -> list[str]:
    """Names usable as a tier ``kind``: built-ins, registered ones and entry points."""
    return TIERS.names()


def get_tier_class(name: str) -> type[Tier]:
    """The Tier subclass registered as ``name``; ValueError lists the known names."""
    return TIERS.load(name)


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
