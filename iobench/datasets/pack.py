"""Pack a real ImageNet-layout tree (``train/<class>/*.JPEG``) into the same WebDataset (or
Parquet) shards that ``synth`` writes, so every benchmark runs unchanged on real data."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from iobench.datasets.manifest import MANIFEST_NAME, Manifest
from iobench.datasets.parquet import DEFAULT_ROW_GROUP, check_format, open_shard_writer, save_dataset
from iobench.datasets.shardsize import auto_shard_bytes
from iobench.datasets.shardwriter import ShardWriter
from iobench.host.atomic import atomic_write

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


def list_samples(train: Path) -> tuple[list[str], list[tuple[Path, int]], list[tuple[str, str]]]:
    """Class names (sorted), ``(file, class index)`` pairs in sorted order, and the files skipped
    for their name, each as (path under ``train``, why)."""
    try:
        classes = sorted(p.name for p in train.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as exc:
        raise PackError(f"{train}: cannot list directory: {exc}") from exc
    if not classes:
        raise PackError(f"{train}: no class subdirectories (expected train/<class>/*.JPEG)")
    samples: list[tuple[Path, int]] = []
    skipped: list[tuple[str, str]] = []
    for idx, name in enumerate(classes):
        try:
            files = sorted(p for p in (train / name).iterdir() if p.is_file())
        except OSError as exc:
            raise PackError(f"{train / name}: cannot list directory: {exc}") from exc
        for path in files:
            if path.suffix.lower() in JPEG_SUFFIXES:
                samples.append((path, idx))
            else:
                skipped.append(
                    (str(path.relative_to(train)), f"not a .jpg/.jpeg name ({path.suffix or 'no suffix'})")
                )
    if not samples:
        raise PackError(f"{train}: no .jpg/.jpeg files under its {len(classes)} class folders")
    return classes, samples, skipped


def _not_jpeg(data: bytes) -> str:
    """Why bytes under a JPEG name are not a JPEG, in words."""
    if not data:
        return "empty file"
    for magic, what in ((b"\x89PNG", "PNG"), (b"GIF8", "GIF"), (b"BM", "BMP"), (b"RIFF", "WebP/RIFF")):
        if data.startswith(magic):
            return f"{what} data under a JPEG name"
    if all(32 <= b < 127 or b in b"\t\r\n" for b in data[:256]):
        return "text, not image data"
    return "not JPEG data (no FF D8 FF start of image)"


KEYMAP_NAME = "keymap.tsv"  # sample key -> the file it was packed from


def pack_imagefolder(
    root: str | Path,
    out: str | Path,
    *,
    shard_bytes: int | None = 128 * 2**20,
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
    under .JPEG names) are skipped too; every skipped file is in the manifest's source with why.
    ``keymap.tsv`` maps each sample key to the file it came from (``key<TAB>class/file``), so a
    sample can be traced back to the original. ``format="parquet"`` writes
    ``train-NNNNNN.parquet`` (key/jpg/cls rows, ``row_group`` per row group) instead of tar.
    ``shard_bytes=None``: at least 4 shards per usable core of this host (``auto_shard_bytes``,
    from the files' sizes).
    """
    check_format(format)
    train = find_train_dir(root)
    classes, samples, skipped = list_samples(train)
    if shard_bytes is None:
        shard_bytes = auto_shard_bytes(sum(path.stat().st_size for path, _ in samples))
    if seed is not None:
        random.Random(seed).shuffle(samples)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_NAME).unlink(missing_ok=True)

    writer, keys, jpeg_bytes = _write_shards(
        train,
        samples,
        skipped,
        out,
        format=format,
        shard_bytes=shard_bytes,
        row_group=row_group,
        progress=progress,
    )
    with atomic_write(out / KEYMAP_NAME, "w") as f:
        f.write("\n".join(keys) + "\n")
    # Parquet-only keys only for Parquet: tar manifests stay as they were
    extra = {"format": format, "row_group": row_group} if format == "parquet" else {}
    source = {
        **extra,
        "generator": "pack",
        "root": str(train.resolve()),
        "seed": seed,
        "order": "sorted" if seed is None else "shuffled",
        "shard_bytes": shard_bytes,
        "skipped": len(skipped),
        "skipped_files": [{"path": p, "why": why} for p, why in skipped[:1000]],
        "keymap": KEYMAP_NAME,
    }
    return save_dataset(
        out,
        writer.entries,
        classes=len(classes),
        class_names=classes,
        source=source,
        jpeg_bytes=jpeg_bytes,
        format=format,
    )


def _write_shards(
    train: Path,
    samples: list[tuple[Path, int]],
    skipped: list[tuple[str, str]],
    out: Path,
    *,
    format: str,
    shard_bytes: int,
    row_group: int,
    progress: Callable[[int, int], None] | None,
) -> tuple[ShardWriter, list[str], int]:
    """Every JPEG of ``samples`` into shards: the writer, the keymap lines and the JPEG bytes written.

    A file whose bytes are not JPEG is added to ``skipped`` with why.
    """
    jpeg_bytes = 0
    keys: list[str] = []
    with open_shard_writer(format, out, shard_bytes, row_group=row_group) as writer:
        for i, (path, label) in enumerate(samples):
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise PackError(f"{path}: cannot read: {exc}") from exc
            if not data.startswith(_JPEG_MAGIC):
                skipped.append((str(path.relative_to(train)), _not_jpeg(data)))
            else:
                key = f"{len(keys):06d}"
                writer.add(key, [("jpg", data), ("cls", str(label).encode("ascii"))])
                keys.append(f"{key}\t{path.relative_to(train)}")
                jpeg_bytes += len(data)
            if progress is not None:
                progress(i + 1, len(samples))
        if not keys:
            writer.abort()
            raise PackError(f"{train}: none of the {len(samples)} .jpg/.jpeg files is a JPEG")
    return writer, keys, jpeg_bytes
