"""Parquet shards ``train-NNNNNN.parquet``: the second shard format, same samples as the tar shards.

Columns ``key`` (string), ``jpg`` (binary, the encoded JPEG) and ``cls`` (int64), one row per
sample, in row groups of ``row_group`` samples (the reader's unit of memory). The ``jpg`` column
is stored PLAIN, with no compression and no dictionary: JPEG is entropy-coded already, so a
codec would only burn CPU on both sides for ~0% gain, and every value is distinct. ``key`` and
``cls`` are tiny and compress well (zstd; ``cls`` dictionary-encoded). Pages carry CRC32
checksums so a reader can tell corruption inside the JPEG bytes from a bad image. Min/max
statistics are kept off ``jpg`` (they would be two 100 KB values per page, and useless).

Like the tar writer: shards roll over before they would exceed ``shard_bytes`` (a shard always
holds at least one sample), each is published by temp file + rename with its sha256 computed
while writing, and the manifest (format ``"parquet"``) is written last by the callers.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, ShardEntry, build_manifest
from iobench.datasets.shardwriter import ShardWriter, ShardWriterBase
from iobench.host.atomic import atomic_write

FORMATS = ("wds", "parquet")
PARQUET_SHARD_PATTERN = "train-{:06d}.parquet"
DEFAULT_ROW_GROUP = 1000
SCHEMA = pa.schema([("key", pa.string()), ("jpg", pa.binary()), ("cls", pa.int64())])

# Upper bounds for the roll-over estimate (measured with pyarrow 26: ~0.6 KiB of footer per row
# group, ~25 bytes of header per 1 MiB data page). Generous on purpose: the limit must hold.
_FOOTER_BASE = 8 * 1024
_FOOTER_PER_ROW_GROUP = 2 * 1024
_PAGE_BYTES = 2**20
_PAGE_OVERHEAD = 128
_ROW_OVERHEAD = 4 + 4 + 8 + 8  # jpg and key length prefixes, cls value, definition levels


def check_format(format: str) -> str:
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: allowed values are {', '.join(FORMATS)}")
    return format


class _HashingSink:
    """Hashes and counts while pyarrow writes, so a shard is never read back to checksum it."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self.sha = hashlib.sha256()
        self.pos = 0
        self.closed = False

    def write(self, data: bytes | memoryview) -> int:
        self._raw.write(data)
        self.sha.update(data)
        self.pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        self._raw.flush()

    def close(self) -> None:
        # pyarrow closes its sink when the writer closes; the atomic writer owns the real file.
        self.closed = True


class ParquetShardWriter(ShardWriterBase):
    """Append samples; the same interface as ``ShardWriter`` (``add(key, [(ext, data), ...])``).

    A sample's members must be ``jpg`` and ``cls`` (ASCII integer); a missing ``cls`` is
    stored as a null label, which readers report like a tar sample without ``.cls``.
    """

    def __init__(
        self,
        out_dir: str | Path,
        shard_bytes: int,
        *,
        row_group: int = DEFAULT_ROW_GROUP,
        pattern: str = PARQUET_SHARD_PATTERN,
    ) -> None:
        super().__init__(out_dir, shard_bytes, pattern)
        if row_group < 1:
            raise ValueError(f"row_group must be at least 1, got {row_group}")
        self.row_group = row_group
        self._writer: pq.ParquetWriter | None = None
        self._sink: _HashingSink | None = None
        self._rows: dict[str, list[Any]] = {"key": [], "jpg": [], "cls": []}
        self._pending_bytes = 0  # estimated on-disk bytes of the buffered rows
        self._row_groups = 0
        self._samples = 0

    def add(self, key: str, members: list[tuple[str, bytes]]) -> None:
        parts = dict(members)
        unknown = set(parts) - {"jpg", "cls"}
        if unknown or "jpg" not in parts:
            raise ValueError(f"sample {key!r}: Parquet shards hold jpg and cls members, got {sorted(parts)}")
        jpg = parts["jpg"]
        label = None
        if "cls" in parts:
            try:
                label = int(parts["cls"])
            except ValueError:
                raise ValueError(f"sample {key!r}: label {parts['cls'][:20]!r} is not an integer") from None
        need = self._row_bytes(key, jpg)
        if self._writer is not None and self._estimate(need) > self.shard_bytes:
            self._finish_shard()
        if self._writer is None:
            self._open_shard()
        self._rows["key"].append(key)
        self._rows["jpg"].append(jpg)
        self._rows["cls"].append(label)
        self._pending_bytes += need
        self.payload_bytes += len(jpg) + len(parts.get("cls", b""))
        self._samples += 1
        if len(self._rows["key"]) >= self.row_group:
            self._flush_row_group()

    def _drop_handle(self) -> None:
        self._writer = None

    @staticmethod
    def _row_bytes(key: str, jpg: bytes) -> int:
        pages = -(-len(jpg) // _PAGE_BYTES) + 1  # a value never splits, so >= 1 page boundary
        return len(jpg) + len(key.encode()) + _ROW_OVERHEAD + pages * _PAGE_OVERHEAD

    def _estimate(self, need: int) -> int:
        """Upper bound of the shard's final size if a row taking ``need`` bytes were added."""
        assert self._sink is not None
        groups = self._row_groups + 1 + (len(self._rows["key"]) + 1 > self.row_group)
        return self._sink.pos + self._pending_bytes + need + _FOOTER_BASE + groups * _FOOTER_PER_ROW_GROUP

    def _open_shard(self) -> None:
        self._name = self.pattern.format(len(self.entries))
        stack = contextlib.ExitStack()
        raw = stack.enter_context(atomic_write(self.out_dir / self._name, "wb"))
        self._sink = _HashingSink(raw)
        self._writer = pq.ParquetWriter(
            self._sink,  # type: ignore[arg-type]
            SCHEMA,
            compression={"key": "zstd", "jpg": "none", "cls": "zstd"},
            use_dictionary=["cls"],
            write_statistics=["key", "cls"],
            write_page_checksum=True,
        )
        self._stack = stack
        self._row_groups = 0
        self._samples = 0

    def _flush_row_group(self) -> None:
        assert self._writer is not None
        if not self._rows["key"]:
            return
        table = pa.table(self._rows, schema=SCHEMA)
        self._writer.write_table(table, row_group_size=len(table))  # exactly one row group
        self._rows = {"key": [], "jpg": [], "cls": []}
        self._pending_bytes = 0
        self._row_groups += 1

    def _finish_shard(self) -> None:
        assert self._writer is not None and self._stack is not None and self._sink is not None
        self._flush_row_group()
        self._writer.close()
        size = self._sink.pos
        if size > self.shard_bytes and self._samples > 1:  # the roll-over estimate must be a bound
            raise RuntimeError(f"Parquet shard of {size} bytes exceeds shard_bytes={self.shard_bytes}")
        stack, self._stack, self._writer = self._stack, None, None
        stack.close()  # fsync + rename: the shard becomes visible only now, complete
        self.entries.append(ShardEntry(self._name, size, self._samples, self._sink.sha.hexdigest()))


def open_shard_writer(
    format: str, out_dir: str | Path, shard_bytes: int, *, row_group: int = DEFAULT_ROW_GROUP
) -> ShardWriter | ParquetShardWriter:
    """A ``ShardWriter`` (tar + DALI index) or a ``ParquetShardWriter``: same ``add``/``entries``."""
    if check_format(format) == "parquet":
        return ParquetShardWriter(out_dir, shard_bytes, row_group=row_group)
    return ShardWriter(out_dir, shard_bytes)


def remove_stale_shards(out: Path, keep: set[str]) -> None:
    """Delete shards of either format not in ``keep``: a previous, larger run (or one in the other
    format) may have left files that would be misread as ours."""
    for pattern in ("train-*.tar", "train-*.parquet"):
        for path in out.glob(pattern):
            if path.name not in keep:
                path.unlink()
                if path.suffix == ".tar":
                    path.with_suffix(".idx").unlink(missing_ok=True)


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
    from loaders.formats import iter_samples

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
    remove_stale_shards(out, {e.name for e in writer.entries})
    source = {
        "generator": "convert",
        "format": "parquet",
        "row_group": row_group,
        "shard_bytes": shard_bytes,
        "from": str(src.resolve()),
        "from_source": manifest.source,
    }
    converted = build_manifest(
        writer.entries,
        classes=manifest.classes,
        class_names=manifest.class_names,
        source=source,
        jpeg_bytes=jpeg_bytes,
        format="parquet",
    )
    converted.save(out)
    return converted
