"""Datasets in either shard format: the format names, the dataset's shard writer for one, stale
shards removed, and a tar dataset converted to Parquet (same keys, labels and JPEG bytes in the
same order, so one dataset can be measured in both formats).

Parquet shards ``train-NNNNNN.parquet`` hold one row per sample (``key``, ``jpg``, ``cls``), in row
groups of ``row_group`` samples: the format, and its writer, are loaders.formats' (parquet_writer.py,
beside its reader). Like the tar shards, each is published by temp file + rename with its sha256
computed while writing, and the manifest (format ``"parquet"``) is written last by the callers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, ShardEntry, build_manifest
from iobench.datasets.shardwriter import ShardWriter
from loaders.formats import DEFAULT_ROW_GROUP, FORMATS, format_named, iter_samples

__all__ = [
    "DEFAULT_ROW_GROUP",
    "ParquetShardWriter",
    "check_format",
    "convert_to_parquet",
    "open_shard_writer",
    "remove_stale_shards",
    "save_dataset",
]


def check_format(format: str) -> str:
    return format_named(format).name


class ParquetShardWriter(ShardWriter):
    """A dataset's writer of Parquet shards (``add(key, [("jpg", ...), ("cls", ...)])``)."""

    def __init__(self, out_dir: str | Path, shard_bytes: int, *, row_group: int = DEFAULT_ROW_GROUP) -> None:
        super().__init__(out_dir, shard_bytes, format="parquet", row_group=row_group)


def open_shard_writer(
    format: str, out_dir: str | Path, shard_bytes: int, *, row_group: int = DEFAULT_ROW_GROUP
) -> ShardWriter:
    """The dataset's writer of shards in ``format``: tar + DALI index ("wds") or Parquet."""
    if check_format(format) == "parquet":
        return ParquetShardWriter(out_dir, shard_bytes, row_group=row_group)
    return ShardWriter(out_dir, shard_bytes)


def remove_stale_shards(out: Path, keep: set[str]) -> None:
    """Delete shards of either format not in ``keep``: a previous, larger run (or one in the other
    format) may have left files that would be misread as ours."""
    for shard_format in FORMATS:
        for path in out.glob(f"train-*{shard_format.suffix}"):
            if path.name not in keep:
                path.unlink()
                if path.suffix == ".tar":
                    path.with_suffix(".idx").unlink(missing_ok=True)


def save_dataset(
    out: Path,
    shards: list[ShardEntry],
    *,
    classes: int,
    class_names: list[str] | None,
    source: dict[str, Any],
    jpeg_bytes: int,
    format: str,
) -> Manifest:
    """Close a dataset just written into ``out``: shards a previous run left there removed, then its
    manifest (what makes the directory a dataset) written last."""
    remove_stale_shards(out, {e.name for e in shards})
    manifest = build_manifest(
        shards, classes=classes, class_names=class_names, source=source, jpeg_bytes=jpeg_bytes, format=format
    )
    manifest.save(out)
    return manifest


def convert_to_parquet(
    wds_dataset_dir: str | Path,
    out_dir: str | Path,
    row_group: int = DEFAULT_ROW_GROUP,
    *,
    shard_bytes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """Rewrite a tar-shard dataset as Parquet shards in ``out_dir``: same keys, labels and JPEG
    bytes in the same order, so one dataset can be measured in both formats.

    ``shard_bytes`` defaults to the source's (its manifest's ``source.shard_bytes``, else 128 MiB).
    A sample without ``.cls`` gets a null label (readers report it the same way); one without
    ``.jpg`` or with extra members cannot be represented and is an error.
    """
    src, out = Path(wds_dataset_dir), Path(out_dir)
    if src.resolve() == out.resolve():
        raise ValueError(f"{out}: convert into a different directory than the source dataset")
    manifest = Manifest.load(src)
    if manifest.format != "wds":
        raise ValueError(f"{src}: dataset format is {manifest.format!r}, convert_to_parquet reads 'wds'")
    if shard_bytes is None:
        recorded = manifest.source.get("shard_bytes")
        shard_bytes = recorded if isinstance(recorded, int) and recorded > 0 else 128 * 2**20
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)  # the directory must not look complete meanwhile
    jpeg_bytes = done = 0
    with ParquetShardWriter(out, shard_bytes, row_group=row_group) as writer:
        for path in manifest.shard_paths(src):
            with open(path, "rb") as f:
                for sample in iter_samples(f, str(path)):
                    try:
                        writer.add(sample.key, list(sample.parts.items()))
                    except ValueError as exc:
                        raise ValueError(f"{path}: {exc}") from None
                    jpeg_bytes += len(sample.parts["jpg"])
                    done += 1
                    if progress is not None:
                        progress(done, manifest.num_samples)
    source = {
        "generator": "convert",
        "format": "parquet",
        "row_group": row_group,
        "shard_bytes": shard_bytes,
        "from": str(src.resolve()),
        "from_source": manifest.source,
    }
    return save_dataset(
        out,
        writer.entries,
        classes=manifest.classes,
        class_names=manifest.class_names,
        source=source,
        jpeg_bytes=jpeg_bytes,
        format="parquet",
    )
