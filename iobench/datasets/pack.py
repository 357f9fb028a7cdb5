"""Pack a real ImageNet-layout tree (``train/<class>/*.JPEG``) into the same WebDataset (or
Parquet) shards that ``synth`` writes, so every benchmark runs unchanged on real data."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, build_manifest
from iobench.datasets.parquet import DEFAULT_ROW_GROUP, check_format, open_shard_writer, remove_stale_shards

JPEG_SUFFIXES = frozenset({".jpg", ".jpeg"})
_JPEG_MAGIC = b"\xff\xd8\xff"


class PackError(ValueError):
    """The source tree cannot be packed; the message names the path."""


def find_train_dir(root: str | Path) -> Path:
    """``root`` itself when it holds class folders, else ``root/train``."""
    root = Path(root)
    if not root.is_dir():
        raise PackError(f"{root}: not a directory")
    train = root / "train"
    return train if train.is_dir() else root


def list_samples(train: Path) -> tuple[list[str], list[tuple[Path, int]], int]:
    """Class names (sorted), ``(file, class index)`` pairs in sorted order, and the number of
    files skipped for not having a JPEG suffix."""
    try:
        classes = sorted(p.name for p in train.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as exc:
        raise PackError(f"{train}: cannot list directory: {exc}") from exc
    if not classes:
        raise PackError(f"{train}: no class subdirectories (expected train/<class>/*.JPEG)")
    samples: list[tuple[Path, int]] = []
    skipped = 0
    for idx, name in enumerate(classes):
        try:
            files = sorted(p for p in (train / name).iterdir() if p.is_file())
        except OSError as exc:
            raise PackError(f"{train / name}: cannot list directory: {exc}") from exc
        for path in files:
            if path.suffix.lower() in JPEG_SUFFIXES:
                samples.append((path, idx))
            else:
                skipped += 1
    if not samples:
        raise PackError(f"{train}: no .jpg/.jpeg files under its {len(classes)} class folders")
    return classes, samples, skipped


def pack_imagefolder(
    root: str | Path,
    out: str | Path,
    *,
    shard_bytes: int = 128 * 2**20,
    seed: int | None = 0,
    progress: Callable[[int, int], None] | None = None,
    format: str = "wds",
    row_group: int = DEFAULT_ROW_GROUP,
) -> Manifest:
    """Shard an ImageFolder tree into ``out`` and write its manifest last.

    ``seed`` (default 0) shuffles the sample order once, deterministically. That is the better
    default for training: WebDataset readers stream shards sequentially with only a small
    shuffle buffer, so class-sorted shards would give near single-class batches. ``seed=None``
    keeps the sorted (class, file name) order. Keys are ``NNNNNN`` in output order; the class
    index is the position of the folder name in the sorted list recorded in the manifest.
    Files with a JPEG suffix whose bytes are not JPEG (ImageNet has a few PNG/CMYK oddities
    under .JPEG names) are skipped too and counted separately. ``format="parquet"`` writes
    ``train-NNNNNN.parquet`` (key/jpg/cls rows, ``row_group`` per row group) instead of tar.
    """
    check_format(format)
    train = find_train_dir(root)
    classes, samples, skipped_suffix = list_samples(train)
    if seed is not None:
        random.Random(seed).shuffle(samples)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)

    skipped_content: list[str] = []
    jpeg_bytes = 0
    written = 0
    with open_shard_writer(format, out, shard_bytes, row_group=row_group) as writer:
        for i, (path, label) in enumerate(samples):
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise PackError(f"{path}: cannot read: {exc}") from exc
            if not data.startswith(_JPEG_MAGIC):
                skipped_content.append(str(path.relative_to(train)))
            else:
                writer.add(f"{written:06d}", [("jpg", data), ("cls", str(label).encode("ascii"))])
                written += 1
                jpeg_bytes += len(data)
            if progress is not None:
                progress(i + 1, len(samples))
        if written == 0:
            writer.abort()
            raise PackError(f"{train}: none of the {len(samples)} .jpg/.jpeg files is a JPEG")

    remove_stale_shards(out, {e.name for e in writer.entries})
    # Parquet-only keys only for Parquet: tar manifests stay as they were
    extra = {"format": format, "row_group": row_group} if format == "parquet" else {}
    source = {
        **extra,
        "generator": "pack",
        "root": str(train.resolve()),
        "seed": seed,
        "order": "sorted" if seed is None else "shuffled",
        "shard_bytes": shard_bytes,
        "skipped_non_jpeg_suffix": skipped_suffix,
        "skipped_not_jpeg_content": len(skipped_content),
        "skipped_examples": skipped_content[:20],
    }
    manifest = build_manifest(
        writer.entries,
        classes=len(classes),
        class_names=classes,
        source=source,
        jpeg_bytes=jpeg_bytes,
        format=format,
    )
    manifest.save(out)
    return manifest
