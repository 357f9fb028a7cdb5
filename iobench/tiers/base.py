"""The contract every storage tier implements, and the cache state a run records."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from iobench.results.choices import CacheAchieved, CacheMode
from iobench.results.figures import CacheState
from iobench.results.spec import CACHE_MODES
from loaders.options import Option, check_options
from loaders.storage import ResolvedClient, SourceSpec

__all__ = [
    "CACHE_MODES",
    "COLD_MAX_FRACTION",
    "DEADLINE_OPTION",
    "DEFAULT_DEADLINE_S",
    "WARM_MIN_FRACTION",
    "CacheState",
    "Option",
    "Tier",
    "TierConfigError",
    "classify_fraction",
    "resident_state",
]


# A few percent can stay resident after eviction (mapped or in-flight pages); below this a
# run still measures the storage, above it the page cache noticeably flatters the result.
COLD_MAX_FRACTION = 0.05
WARM_MIN_FRACTION = 0.95


class TierConfigError(ValueError):
    """A tier's configuration is wrong; the message names the key, the value and what is allowed."""


# How long a tier's storage may go without answering (or, for a file system, without progress on
# a read) before the read fails: a dead daemon is reported within it, a slow one is waited for.
DEFAULT_DEADLINE_S = 30.0
DEADLINE_OPTION = Option(
    (int, float),
    default=DEFAULT_DEADLINE_S,
    help="seconds the storage may go without answering (S3: to first byte and between bytes, "
    "retries included; RADOS: per operation; CephFS: per read) before the cell fails, default "
    f"{DEFAULT_DEADLINE_S:g}",
)


def check_deadline(owner: str, config: Mapping[str, Any]) -> None:
    value = config.get("deadline_s")
    if value is not None and not 0 < value <= 3600:
        raise TierConfigError(
            f"{owner}: deadline_s={value!r}: expected seconds > 0 and <= 3600 (default {DEFAULT_DEADLINE_S:g})"
        )


def classify_fraction(fraction: float | None) -> CacheAchieved:
    """Name the cache state a resident fraction amounts to."""
    if fraction is None:
        return "unknown"
    if fraction <= COLD_MAX_FRACTION:
        return "cold"
    if fraction >= WARM_MIN_FRACTION:
        return "warm"
    return "partly-cold"


def resident_state(
    requested: CacheMode,
    method: str,
    resident_bytes: int,
    total_bytes: int,
    note: Callable[[float, str], str],
) -> CacheState:
    """What a repeat found cached before it started: ``resident_bytes`` of the dataset's
    ``total_bytes``, as a fraction (0.0 of an empty dataset) and what that fraction amounts to
    (unknown for an empty dataset: nothing of it could be cached or not); ``note(fraction,
    achieved)`` says it for a person, in the tier's words."""
    fraction = resident_bytes / total_bytes if total_bytes else 0.0
    achieved = classify_fraction(fraction) if total_bytes else "unknown"
    return CacheState(
        requested=requested,
        method=method,
        resident_bytes_before=resident_bytes,
        total_bytes=total_bytes,
        resident_fraction_before=fraction,
        achieved=achieved,
        note=note(fraction, achieved),
    )


class Tier(abc.ABC):
    """A place a dataset lives: how to reach it, make it cold or warm, and describe it.

    Subclasses declare ``options``; the base constructor validates a config mapping against
    them so every tier rejects typos the same way (a silently ignored key would quietly
    benchmark the wrong thing).
    """

    kind: ClassVar[str]
    options: ClassVar[Mapping[str, Option]] = {}
    # its reads reach this host's block devices, where a cold window's reads can be counted (a
    # kind's own, or, for a tier that wraps another, the wrapped one's)
    reads_block_devices: bool = False

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """Validate a config mapping against ``options``; return it with defaults filled in.

        No side effects, so a sweep can check every tier before it starts measuring.
        """
        return check_options(f"tier {cls.kind!r}", cls.options, options, TierConfigError)

    def __init__(self, **options: Any) -> None:
        self.config: dict[str, Any] = self.check_options(options)

    @abc.abstractmethod
    def dataset_dir_or_url(self) -> str:
        """Where the dataset lives, as a URL fsspec understands ("/abs/path", "s3://b/p")."""

    @abc.abstractmethod
    def shard_urls(self, manifest: Any) -> list[str]:
        """One URL per shard of `manifest` (iobench.datasets.manifest.Manifest)."""

    def storage_options(self) -> dict[str, Any]:
        """fsspec's storage options for the URLs (nothing of ours: the deadline and the rest are
        fields of :meth:`source`); may hold credentials, never logged."""
        return {}

    def load_manifest(self) -> Any:
        """The dataset's manifest (iobench.datasets.manifest.Manifest), read from the tier."""
        from ..datasets.manifest import Manifest

        return Manifest.load(self.dataset_dir_or_url())

    def object_url(self, name: str) -> str:
        """The URL of a file of the dataset (``objects/000001.jpg``) as the loaders read it."""
        return f"{self.dataset_dir_or_url().rstrip('/')}/{name}"

    def read_json(self, name: str) -> Any:
        """A JSON file of the dataset (the objects index, say), read from the tier."""
        import json

        path = self.object_url(name)
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path} does not exist: the dataset has no {name}"
                + (
                    " (make the objects layout with `iobench dataset objects DATASET`)"
                    if "objects" in name
                    else ""
                )
            ) from None

    def upload_dataset(self, dataset_dir: str) -> str:
        """Put a local dataset on this tier (idempotent); returns a one-line report."""
        raise TierConfigError(f"tier {self.kind!r} cannot upload datasets; put the data in place yourself")

    def source(self, manifest: Any) -> SourceSpec:
        """How the loaders read this tier's copy of ``manifest``'s dataset."""
        return SourceSpec(storage_options=self.storage_options(), deadline_s=self.deadline_s)

    @property
    def deadline_s(self) -> float | None:
        """The tier's deadline (option ``deadline_s``), None for a tier without one (local disks)."""
        value = self.config.get("deadline_s")
        return float(value) if value is not None else None

    @classmethod
    def one_per_client(cls, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The sweep file's tier mapping as the tiers it stands for: itself, unless the kind reads
        through a choice of object clients and the mapping names several (tiers/s3.py)."""
        return [dict(spec)]

    def object_client(self) -> ResolvedClient | None:
        """The object client the tier's readers read through (loaders/storage/clients/), or None for
        a tier read through none (a file system, librados)."""
        return None

    def client_cache(self) -> tuple[str, str] | None:
        """(directory, medium) of the tier's client-side shard cache, or None: the sweep cleans what
        a killed cell left there and removes a RAM cache when it ends."""
        return None

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """JSON-able description of the tier for reports. Must never contain secrets."""

    @abc.abstractmethod
    def prepare(self, manifest: Any, cache: CacheMode) -> CacheState:
        """Make the dataset `cache` ("cold" | "warm" | "as-is") and measure what was achieved."""

    @staticmethod
    def check_cache_mode(cache: str) -> None:
        if cache not in CACHE_MODES:
            raise TierConfigError(
                f"cache mode {cache!r} is not one of {', '.join(repr(c) for c in CACHE_MODES)}"
            )
