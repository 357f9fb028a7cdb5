"""Synthetic ImageNet shards: realistic JPEGs, deterministic bytes, honest manifest and index."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import simplejpeg

from iobench.datasets import photos
from iobench.datasets.manifest import MANIFEST_NAME, Manifest, verify
from iobench.datasets.synth import ensure_dataset, synthesize
from iobench.datasets.wdsindex import wds_index_lines
from loaders.formats import archive_bytes, member_bytes
from tests.helpers.shardkit import dataset_members

KIB = 1024


def read_samples(directory: Path) -> list[tuple[str, dict[str, bytes]]]:
    return list(dataset_members(directory).items())


@pytest.fixture(scope="module")
def samples(tiny_dataset: Path) -> list[tuple[str, dict[str, bytes]]]:
    return read_samples(tiny_dataset)


def test_keys_and_members(samples):
    assert len(samples) >= 200
    assert [k for k, _ in samples] == [f"{i:06d}" for i in range(len(samples))]
    assert all(set(m) == {"jpg", "cls"} for _, m in samples)


def test_mean_jpeg_size_is_imagenet_like(samples, tiny_dataset):
    sizes = np.array([len(m["jpg"]) for _, m in samples])
    assert 110 * KIB * 0.85 <= sizes.mean() <= 110 * KIB * 1.15
    # a spread, not one size: ImageNet's files range over an order of magnitude
    assert sizes.std() / sizes.mean() > 0.1
    manifest = Manifest.load(tiny_dataset)
    assert manifest.mean_jpeg_bytes == pytest.approx(sizes.mean())


def test_resolution_spread_like_imagenet_train(samples):
    dims = []
    subsampling = Counter()
    for _, m in samples:
        h, w, colorspace, sub = simplejpeg.decode_jpeg_header(m["jpg"])
        dims.append((w, h))
        subsampling[sub] += 1
        assert colorspace == "YCbCr"
    w, h = np.array(dims).T
    long_side, short_side = np.maximum(w, h), np.minimum(w, h)
    assert np.mean((long_side >= 300) & (long_side <= 500)) >= 0.9
    assert short_side.min() >= 200 and short_side.max() <= 500
    landscape = np.mean(w > h)
    assert 0.55 <= landscape <= 0.85
    assert np.any(h > w)  # portrait images exist too
    aspects = Counter(np.round(long_side / short_side, 1))
    assert len(aspects) >= 4 and max(aspects.values()) / len(dims) < 0.8
    assert set(subsampling) >= {"420", "444"}
    assert 0.15 <= subsampling["444"] / len(dims) <= 0.45


def test_every_jpeg_decodes_to_its_header_size(samples):
    for _, m in samples:
        h, w, _, _ = simplejpeg.decode_jpeg_header(m["jpg"])
        img = simplejpeg.decode_jpeg(m["jpg"])
        assert img.shape == (h, w, 3)
        assert img.std() > 5  # a photo, not a flat fill


def test_labels_are_ascii_class_ids(samples):
    labels = []
    for _, m in samples:
        text = m["cls"].decode("ascii")
        assert text == str(int(text))  # plain decimal, no padding or newline
        labels.append(int(text))
    assert min(labels) >= 0 and max(labels) <= 999
    assert len(set(labels)) > len(labels) // 2  # spread over the 1000 classes


def test_manifest_matches_files(tiny_dataset):
    manifest = Manifest.load(tiny_dataset)
    assert manifest.format == "wds" and manifest.classes == 1000 and manifest.class_names is None
    assert manifest.source["generator"] == "iobench.synth" and manifest.source["seed"] == 3
    assert [s.name for s in manifest.shards] == [f"train-{i:06d}.tar" for i in range(len(manifest.shards))]
    for entry, path in zip(manifest.shards, manifest.shard_paths(tiny_dataset), strict=True):
        data = path.read_bytes()
        assert entry.bytes == len(data)
        assert entry.sha256 == hashlib.sha256(data).hexdigest()
        with tarfile.open(path) as tf:
            assert entry.samples * 2 == len(tf.getmembers())
    assert manifest.num_samples == 256
    assert manifest.total_bytes == sum(p.stat().st_size for p in tiny_dataset.glob("train-*.tar"))
    assert verify(tiny_dataset, manifest) == []
    assert not list(tiny_dataset.glob(".*"))  # no temporaries left behind


def test_shards_respect_size_limit(tiny_dataset):
    limit = 3_600_000
    manifest = Manifest.load(tiny_dataset)
    assert len(manifest.shards) >= 3
    paths = manifest.shard_paths(tiny_dataset)
    for k, path in enumerate(paths):
        assert path.stat().st_size <= limit
        with tarfile.open(path) as tf:
            members = tf.getmembers()
            assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" for m in members)
        used = sum(member_bytes(m.size) for m in members)
        assert archive_bytes(used) == path.stat().st_size
        if k + 1 < len(paths):  # it closed only because the next sample would not fit
            with tarfile.open(paths[k + 1]) as nxt:
                first = nxt.getmembers()[:2]
            assert archive_bytes(used + sum(member_bytes(m.size) for m in first)) > limit


def test_dali_index_points_at_member_data(tiny_dataset):
    manifest = Manifest.load(tiny_dataset)
    for entry, path in zip(manifest.shards, manifest.shard_paths(tiny_dataset), strict=True):
        lines = path.with_suffix(".idx").read_text().splitlines()
        assert lines == wds_index_lines(path)
        with open(path, "rb") as f:  # streaming mode (as from S3) must agree with the seekable one
            assert wds_index_lines(io.BufferedReader(f)) == lines
        assert lines[0] == f"v1.2 {entry.samples}"
        blob = path.read_bytes()
        with tarfile.open(path) as tf:
            members = {m.name: m for m in tf.getmembers()}
            for line in lines[1:]:
                fields = line.split()
                assert len(fields) == 8  # jpg and cls components
                for ext, offset, size, name in zip(*[iter(fields)] * 4, strict=True):
                    m = members[name]
                    assert name.endswith("." + ext)
                    assert int(offset) == m.offset + 512 == m.offset_data
                    f = tf.extractfile(m)
                    assert f is not None
                    assert blob[int(offset) : int(offset) + int(size)] == f.read()


def test_same_seed_same_bytes_independent_of_workers(tmp_path):
    a = synthesize(tmp_path / "a", samples=40, seed=7, shard_bytes=1_500_000, workers=1)
    b = synthesize(tmp_path / "b", samples=40, seed=7, shard_bytes=1_500_000, workers=2)
    c = synthesize(tmp_path / "c", samples=40, seed=8, shard_bytes=1_500_000, workers=1)
    assert len(a.shards) >= 2
    assert [s.sha256 for s in a.shards] == [s.sha256 for s in b.shards]
    assert (tmp_path / "a" / MANIFEST_NAME).read_bytes() == (tmp_path / "b" / MANIFEST_NAME).read_bytes()
    assert not {s.sha256 for s in a.shards} & {s.sha256 for s in c.shards}
    first_a, first_c = read_samples(tmp_path / "a")[0][1], read_samples(tmp_path / "c")[0][1]
    assert first_a["jpg"] != first_c["jpg"]


def test_size_target_sets_sample_count(tmp_path):
    m = synthesize(tmp_path / "d", size_bytes=4_000_000, seed=1, workers=1)
    assert len(m.shards) == 1  # default 128 MiB shards
    assert 0.7 * 4_000_000 <= m.total_bytes <= 1.3 * 4_000_000
    assert m.num_samples == round(4_000_000 / (m.source["calibration_mean_jpeg_bytes"] + 1792))


def test_ensure_dataset_reuses_then_repairs(tmp_path):
    out = tmp_path / "e"
    kwargs = {"samples": 12, "seed": 2, "shard_bytes": 600_000, "workers": 1}
    first = ensure_dataset(out, **kwargs)
    shard = first.shard_paths(out)[0]
    stamp = shard.stat().st_mtime_ns
    assert ensure_dataset(out, **kwargs) == first
    assert shard.stat().st_mtime_ns == stamp  # reused, not rewritten
    with open(shard, "r+b") as f:
        f.truncate(1000)
    repaired = ensure_dataset(out, **kwargs)
    assert repaired.shards == first.shards and verify(out, repaired) == []
    other = ensure_dataset(out, **dict(kwargs, seed=5))
    assert other.source["seed"] == 5 and other.shards != first.shards


def test_crash_leaves_no_manifest_and_no_partial_shard(tmp_path):
    out = tmp_path / "f"

    def boom(done: int, total: int) -> None:
        if done == 9:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        synthesize(out, samples=20, seed=0, shard_bytes=600_000, workers=1, progress=boom)
    assert not (out / MANIFEST_NAME).exists()
    assert not list(out.glob(".*"))
    visible = sorted(out.glob("train-*.tar"))
    assert visible  # shards finished before the crash stay, each one whole
    for path in visible:
        with tarfile.open(path) as tf:
            assert len(tf.getmembers()) % 2 == 0


def test_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        synthesize(tmp_path, samples=5, size_bytes=10**6)
    with pytest.raises(ValueError, match="exactly one"):
        synthesize(tmp_path)
    with pytest.raises(ValueError, match="seed"):
        synthesize(tmp_path, samples=5, seed=-1)
    with pytest.raises(ValueError, match=r"mean sample can be 56-180 KiB .*30\.0 KiB asked"):
        synthesize(tmp_path, samples=5, target_kb=30)


def test_a_smaller_target_makes_smaller_samples_and_the_manifest_records_it(tmp_path):
    kwargs = {"samples": 8, "seed": 3, "shard_bytes": 600_000, "workers": 1}
    usual = synthesize(tmp_path / "usual", **kwargs)
    small = synthesize(tmp_path / "small", target_kb=60, **kwargs)
    assert (usual.source["target_kb"], small.source["target_kb"]) == (110.0, 60.0)
    # calibration promises its mean within 2 % of the target over its own 128 samples
    assert small.source["calibration_mean_jpeg_bytes"] == pytest.approx(60 * KIB, rel=0.02)
    # the same images under weaker noise: every one smaller, not just on average
    sizes = [[len(m["jpg"]) for _, m in read_samples(tmp_path / d)] for d in ("usual", "small")]
    assert all(s < u for u, s in zip(*sizes, strict=True))
    assert small.mean_jpeg_bytes < 0.75 * usual.mean_jpeg_bytes
    assert small.mean_sample_bytes < usual.mean_sample_bytes


def test_source_photos_ship_in_the_package_with_their_licences():
    root = photos.data_dir()
    names = [fname for fname, _, _ in photos.SOURCES]
    assert {p.name for p in root.iterdir()} == {*names, "README.md"}  # nothing unlisted ships
    rows = (root / "README.md").read_text().splitlines()
    for fname in names:
        (row,) = [line for line in rows if line.startswith(f"| `{fname}` |")]
        licence = row.rstrip(" |").rsplit("|", 1)[1]
        assert "public domain" in licence or "CC0" in licence, row
    for photo in photos.load_photos():
        assert max(photo.pixels.shape[:2]) <= photos.MAX_SIDE  # stored pre-scaled
        assert photo.pixels.dtype == np.uint8 and photo.pixels.shape[2] == 3


def test_synthesis_needs_no_scikit_image_or_scipy():
    code = (
        "import sys; from iobench.datasets.synth import render_sample; render_sample(0, 0, 21.0); "
        "assert not {'skimage', 'scipy', 'matplotlib'} & set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_source_photos_are_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(photos, "data_dir", lambda: tmp_path)
    with pytest.raises(
        photos.PhotoSourceError, match=r"astronaut\.png.*ships with iobench.*reinstall iobench"
    ):
        photos.load_photos.__wrapped__()  # uncached: the real load, from the empty directory


def test_without_a_shard_size_synth_writes_4_shards_per_usable_core(tmp_path):
    from iobench.datasets.shardsize import MAX_SHARD_BYTES
    from iobench.host.cores import usable_cores

    manifest = synthesize(tmp_path / "auto", samples=96, seed=2, shard_bytes=None)
    assert len(manifest.shards) >= min(96, 4 * usable_cores())  # a shard holds one sample at least
    chosen = manifest.source["shard_bytes"]
    assert chosen < MAX_SHARD_BYTES and all(s.bytes <= chosen for s in manifest.shards)
