"""The one-object-per-sample layout: ``DIR/objects/NNNNNN.jpg`` plus ``DIR/objects/index.json``.

Made from a dataset's shards (the same bytes, so the shard and object layouts compare the same
samples). Small-object reads behave very differently from shard streams on object stores; this
layout lets a sweep measure both on every access path. The index is written last: a directory
with an index is complete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iobench.host.atomic import atomic_write, atomic_write_json

from .manifest import Manifest

OBJECTS_DIR = "objects"
INDEX_NAME = f"{OBJECTS_DIR}/index.json"
INDEX_VERSION = 1


def load_object_index(raw: Any, where: str = INDEX_NAME) -> list[dict]:
    if (
        not isinstance(raw, dict)
        or raw.get("schema_version") != INDEX_VERSION
        or not isinstance(raw.get("samples"), list)
    ):
        raise ValueError(f"{where}: not an iobench objects index (schema_version {INDEX_VERSION})")
    return raw["samples"]


def explode(dataset_dir: str | Path) -> list[dict]:
    """Write every sample of the shards as its own file (idempotent); return the index entries."""
    from loaders.formats import iter_samples

    root = Path(dataset_dir)
    manifest = Manifest.load(root)
    index_path = root / INDEX_NAME
    if index_path.exists():
        samples = load_object_index(json.loads(index_path.read_text()), str(index_path))
        if len(samples) == manifest.num_samples:
            return samples
    out = root / OBJECTS_DIR
    out.mkdir(exist_ok=True)
    samples = []
    for path in manifest.shard_paths(root):
        with open(path, "rb") as f:
            for sample in iter_samples(f, str(path)):
                ext = next((e for e in ("jpg", "jpeg", "png", "webp") if e in sample.parts), None)
                if ext is None or "cls" not in sample.parts:
                    continue  # the loaders count such samples as errors when they read the shards
                name = f"{sample.key.replace('/', '_')}.{ext}"
                with atomic_write(out / name, "wb") as g:
                    g.write(sample.parts[ext])
                samples.append(
                    {
                        "key": sample.key,
                        "name": name,
                        "label": int(sample.parts["cls"]),
                        "bytes": len(sample.parts[ext]),
                    }
                )
    atomic_write_json(index_path, {"schema_version": INDEX_VERSION, "samples": samples}, indent=None)
    return samples
