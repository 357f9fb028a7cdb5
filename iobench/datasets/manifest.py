"""``manifest.json``: the list of shards and dataset facts; its presence marks a complete dataset.

Writers produce every shard (and index) first and the manifest last, atomically, so a reader
that finds a manifest can trust the directory is whole; ``verify`` checks that trust.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iobench.host.atomic import atomic_write_json

MANIFEST_NAME = "manifest.json"
SCHEMA_VERSION = 1
SHARD_PATTERN = "train-{:06d}.tar"


class ManifestError(ValueError):
    """A manifest is missing or malformed; the message names the file and the offending key."""


@dataclass(frozen=True)
class ShardEntry:
    name: str  # file name relative to the dataset directory
    bytes: int
    samples: int
    sha256: str


@dataclass
class Manifest:
    format: str
    shards: list[ShardEntry]
    num_samples: int
    total_bytes: int  # sum of shard file sizes: what a full epoch reads
    mean_sample_bytes: float  # total_bytes / num_samples, tar overhead included
    classes: int
    class_names: list[str] | None
    source: dict[str, Any]  # generator or pack parameters, enough to tell if data is stale
    schema_version: int = SCHEMA_VERSION
    mean_jpeg_bytes: float | None = None  # payload only: what a decoder sees

    @classmethod
    def load(cls, directory: str | Path) -> Manifest:
        path = Path(directory) / MANIFEST_NAME
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ManifestError(f"{path}: no manifest (dataset missing or incomplete)") from None
        except OSError as exc:
            raise ManifestError(f"{path}: cannot read manifest: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ManifestError(f"{path}: not UTF-8 text ({exc}); is it a manifest?") from None
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{path}: not valid JSON: {exc}") from exc
        except RecursionError:
            raise ManifestError(f"{path}: JSON nested too deeply to be a manifest") from None
        return cls.from_dict(raw, where=str(path))

    @classmethod
    def from_dict(cls, raw: Any, *, where: str = MANIFEST_NAME) -> Manifest:
        if not isinstance(raw, dict):
            raise ManifestError(f"{where}: top level must be an object, got {type(raw).__name__}")
        version = _get(raw, "schema_version", int, where)
        if version != SCHEMA_VERSION:
            raise ManifestError(
                f"{where}: key 'schema_version' is {version}, this iobench reads {SCHEMA_VERSION}"
            )
        shards_raw = _get(raw, "shards", list, where)
        shards = []
        for i, s in enumerate(shards_raw):
            key = f"shards[{i}]"
            if not isinstance(s, dict):
                raise ManifestError(f"{where}: key '{key}' must be an object")
            shards.append(
                ShardEntry(
                    name=_shard_name(_get(s, "name", str, where, key), where, key),
                    bytes=_count(_get(s, "bytes", int, where, key), where, f"{key}.bytes"),
                    samples=_count(_get(s, "samples", int, where, key), where, f"{key}.samples"),
                    sha256=_get(s, "sha256", str, where, key),
                )
            )
        class_names = raw.get("class_names")
        if class_names is not None and not (
            isinstance(class_names, list) and all(isinstance(c, str) for c in class_names)
        ):
            raise ManifestError(f"{where}: key 'class_names' must be null or a list of strings")
        mean_jpeg = raw.get("mean_jpeg_bytes")
        if mean_jpeg is not None and not isinstance(mean_jpeg, (int, float)):
            raise ManifestError(f"{where}: key 'mean_jpeg_bytes' must be a number or null")
        m = cls(
            format=_get(raw, "format", str, where),
            shards=shards,
            num_samples=_count(_get(raw, "num_samples", int, where), where, "num_samples"),
            total_bytes=_count(_get(raw, "total_bytes", int, where), where, "total_bytes"),
            mean_sample_bytes=_number(
                _get(raw, "mean_sample_bytes", (int, float), where), where, "mean_sample_bytes"
            ),
            classes=_get(raw, "classes", int, where),
            class_names=class_names,
            source=_get(raw, "source", dict, where),
            schema_version=version,
            mean_jpeg_bytes=None if mean_jpeg is None else _number(mean_jpeg, where, "mean_jpeg_bytes"),
        )
        if m.num_samples != sum(s.samples for s in shards):
            raise ManifestError(f"{where}: key 'num_samples' disagrees with the shard list")
        if m.total_bytes != sum(s.bytes for s in shards):
            raise ManifestError(f"{where}: key 'total_bytes' disagrees with the shard list")
        return m

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shards"] = [asdict(s) for s in self.shards]
        return d

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / MANIFEST_NAME
        atomic_write_json(path, self.to_dict())
        return path

    def shard_paths(self, directory: str | Path) -> list[Path]:
        return [Path(directory) / s.name for s in self.shards]


def build_manifest(
    shards: list[ShardEntry],
    *,
    classes: int,
    class_names: list[str] | None,
    source: dict[str, Any],
    jpeg_bytes: int,
    format: str = "wds",
) -> Manifest:
    """Derive the dataset totals from the shard list so they cannot disagree with it.

    ``format``: "wds" (tar shards + DALI ``.idx``) or "parquet" (``iobench.datasets.parquet``).
    """
    n = sum(s.samples for s in shards)
    total = sum(s.bytes for s in shards)
    return Manifest(
        format=format,
        shards=shards,
        num_samples=n,
        total_bytes=total,
        mean_sample_bytes=total / n if n else 0.0,
        classes=classes,
        class_names=class_names,
        source=source,
        mean_jpeg_bytes=jpeg_bytes / n if n else 0.0,
    )


def sha256_file(path: str | Path, chunk: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify(directory: str | Path, manifest: Manifest, *, check_sha: bool = True) -> list[str]:
    """Problems with the shards on disk; an empty list means the dataset matches its manifest.

    Sizes are always checked (cheap, catches truncation); ``check_sha=False`` skips hashing,
    which reads every byte and is slow on big datasets.
    """
    problems = []
    root = Path(directory)
    for entry in manifest.shards:
        path = root / entry.name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            problems.append(f"{path}: missing shard")
            continue
        if size != entry.bytes:
            problems.append(f"{path}: size {size} bytes, manifest says {entry.bytes}")
            continue
        # only tar shards have DALI indexes; Parquet carries its own (the footer)
        if manifest.format == "wds" and not path.with_suffix(".idx").is_file():
            problems.append(f"{path.with_suffix('.idx')}: missing DALI index")
        if check_sha:
            digest = sha256_file(path)
            if digest != entry.sha256:
                problems.append(f"{path}: sha256 {digest}, manifest says {entry.sha256}")
    return problems


def _shard_name(name: str, where: str, key: str) -> str:
    """A shard name is a path inside the dataset: never absolute, never through '..', no NUL or
    backslash (a manifest fetched from a bucket must not point a reader, or ``verify``, elsewhere)."""
    parts = name.split("/")
    if not name or name.startswith("/") or "\0" in name or "\\" in name or ".." in parts or "" in parts:
        raise ManifestError(
            f"{where}: key '{key}.name' is {name!r}: a shard name must be a relative path inside the "
            "dataset directory (no leading '/', no '..', no empty parts)"
        )
    return name


def _count(value: int, where: str, label: str) -> int:
    if value < 0:
        raise ManifestError(
            f"{where}: key '{label}' is {value}: a count of bytes or samples cannot be negative"
        )
    return value


def _number(value: float, where: str, label: str) -> float:
    try:
        return float(value)
    except OverflowError:
        raise ManifestError(
            f"{where}: key '{label}' is too large for a number: {str(value)[:20]}..."
        ) from None


def _get(obj: dict[str, Any], key: str, kind: Any, where: str, parent: str = "") -> Any:
    label = f"{parent}.{key}" if parent else key
    if key not in obj:
        raise ManifestError(f"{where}: missing key '{label}'")
    value = obj[key]
    # bool is an int subclass; a manifest saying "bytes": true is malformed, not 1.
    if isinstance(value, bool) or not isinstance(value, kind):
        want = kind.__name__ if isinstance(kind, type) else "number"
        raise ManifestError(f"{where}: key '{label}' must be {want}, got {type(value).__name__} {value!r}")
    return value
