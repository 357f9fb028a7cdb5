"""Reading without decoding (``LoaderConfig.decode=False``, MLPerf Storage's reading): every sample's
bytes are read in full and batched as byte lengths, with no image and no decode or augment time."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from loaders import LoaderConfig, make_loader
from loaders.backends.dali.loader import DaliLoader


def _image_bytes(dataset: Path) -> tuple[int, int]:
    """(samples, bytes of their images) as the shards hold them."""
    n = total = 0
    for shard in sorted(dataset.glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".jpg"):
                    n, total = n + 1, total + member.size
    return n, total


@pytest.mark.parametrize(("kind", "workers"), [("torch", 0), ("torch", 1), ("threads", 2), ("nodes", 1)])
def test_every_sample_is_read_in_full_and_batched_as_its_byte_length(tiny_dataset, kind, workers):
    if kind == "nodes":
        pytest.importorskip("torchdata")
    shards = [str(p) for p in sorted(tiny_dataset.glob("*.tar"))]
    config = LoaderConfig(urls=shards, batch_size=32, workers=workers, shuffle_buffer=16, decode=False)
    loader = make_loader(kind, config)
    samples, sizes, read = 0, 0, 0
    for batch in loader:
        assert batch.images is None and batch.sizes is not None  # nothing passes for an image
        assert len(batch.sizes) == len(batch.labels) == len(batch)
        samples += len(batch)
        sizes += int(batch.sizes.sum())
        read += batch.stats.bytes_read
        assert batch.stats.wall_s["decode"] == batch.stats.wall_s["augment"] == 0.0
    n, image_bytes = _image_bytes(tiny_dataset)
    assert samples == n and sizes == image_bytes
    # the bytes read off the storage hold every image in full (and the tar headers and labels)
    assert read >= image_bytes
    assert read <= sum(Path(s).stat().st_size for s in shards)


def test_a_backend_that_decodes_in_its_own_graph_refuses(tiny_dataset):
    config = LoaderConfig(urls=[str(next(tiny_dataset.glob("*.tar")))], decode=False)
    with pytest.raises(ValueError, match="always decodes: decode=False needs nodes, threads, torch"):
        make_loader("dali", config)
    with pytest.raises(ValueError, match="always decodes"):  # the class built directly, too
        DaliLoader(config)
