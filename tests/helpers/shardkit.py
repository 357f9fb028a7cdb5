"""Small, fast WebDataset shards for loader tests (tiny real JPEGs; no synth dependency)."""

from __future__ import annotations

import io
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import simplejpeg


def tiny_jpeg(seed: int, height: int = 48, width: int = 64) -> bytes:
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    return simplejpeg.encode_jpeg(image, quality=85)


def label_of(key: str) -> int:
    return int(key) % 1000


def write_shard(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def shard_with_a_corrupt_jpeg(path: Path, keys: range, corrupt: int, *, label: int | None = None) -> str:
    """A shard of a tiny JPEG for each of ``keys`` (labelled ``label``, else its key), but for key
    ``corrupt``: a JPEG's opening and then no image."""
    members = []
    for key in keys:
        data = tiny_jpeg(key) if key != corrupt else b"\xff\xd8\xff\xe0 not really a jpeg"
        members += [
            (f"{key:06d}.jpg", data),
            (f"{key:06d}.cls", str(key if label is None else label).encode()),
        ]
    return str(write_shard(path, members))


def make_shards(directory: Path, n_shards: int = 4, per_shard: int = 10, start: int = 0) -> list[str]:
    """Shards train-000000.tar... with keys NNNNNN, labels key % 1000."""
    return make_uneven_shards(directory, [per_shard] * n_shards, start=start)


def make_uneven_shards(directory: Path, sizes: list[int], start: int = 0) -> list[str]:
    """Shards of ``sizes[i]`` samples each, keys numbered on from ``start`` across them."""
    directory.mkdir(parents=True, exist_ok=True)
    urls, key = [], start
    for s, n in enumerate(sizes):
        members = []
        for _ in range(n):
            members.append((f"{key:06d}.jpg", tiny_jpeg(key)))
            members.append((f"{key:06d}.cls", str(label_of(f"{key:06d}")).encode()))
            key += 1
        urls.append(str(write_shard(directory / f"train-{s:06d}.tar", members)))
    return urls


ALL_KEYS = [f"{i:06d}" for i in range(40)]  # the keys of make_shards(..., n_shards=4, per_shard=10)


def small_config(urls=None, **overrides):
    """A LoaderConfig for tiny shards: 32 px crops keep decode cheap."""
    from loaders import AugmentSpec, LoaderConfig

    base = {"batch_size": 4, "workers": 0, "shuffle_buffer": 16, "augment": AugmentSpec(size=32)}
    return LoaderConfig(urls=urls, **{**base, **overrides})


def key_label_pairs(batches) -> Counter:
    """The multiset of (key, label) a loader delivered."""
    return Counter(
        (k, int(label)) for b in batches for k, label in zip(b.keys, b.labels.tolist(), strict=True)
    )


def dataset_members(directory: Path) -> dict[str, dict[str, bytes]]:
    """Each sample's members by key and extension, from the tar shards a dataset's manifest lists,
    read with tarfile: independent of the project's readers."""
    from iobench.datasets.manifest import Manifest

    samples: dict[str, dict[str, bytes]] = {}
    for path in Manifest.load(directory).shard_paths(directory):
        with tarfile.open(path) as tf:
            for m in tf:
                key, ext = m.name.split(".", 1)
                f = tf.extractfile(m)
                assert f is not None
                samples.setdefault(key, {})[ext] = f.read()
    return samples
