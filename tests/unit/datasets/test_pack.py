"""Packing a real ImageFolder tree into WebDataset shards."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from iobench.datasets.manifest import Manifest, verify
from iobench.datasets.pack import PackError, pack_imagefolder
from iobench.host.cores import usable_cores

CLASSES = ["n01440764", "n01443537", "n01484850"]  # deliberately created out of order below


def jpeg(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (40, 56, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, dict[bytes, str]]:
    """train/<class>/*.JPEG plus a .txt and a PNG disguised as .JPEG; image bytes -> class."""
    expected: dict[bytes, str] = {}
    for k, cls in enumerate(reversed(CLASSES)):
        d = tmp_path / "train" / cls
        d.mkdir(parents=True)
        for j in range(3 + k):
            data = jpeg(100 * k + j)
            (d / f"{cls}_{j}.JPEG").write_bytes(data)
            expected[data] = cls
    (tmp_path / "train" / CLASSES[0] / "README.txt").write_text("not an image")
    png = io.BytesIO()
    Image.new("RGB", (8, 8)).save(png, "PNG")
    (tmp_path / "train" / CLASSES[1] / "fake.JPEG").write_bytes(png.getvalue())
    (tmp_path / "train" / CLASSES[2] / "empty.jpg").write_bytes(b"")
    (tmp_path / "train" / CLASSES[2] / "notes.jpg").write_text("a text file with a .jpg name")
    return tmp_path, expected


def read(out: Path) -> list[tuple[str, bytes, int]]:
    rows = []
    for path in Manifest.load(out).shard_paths(out):
        with tarfile.open(path) as tf:
            members = tf.getmembers()
            for jpg, cls in zip(members[::2], members[1::2], strict=True):
                assert jpg.name.split(".")[0] == cls.name.split(".")[0]
                rows.append(
                    (jpg.name.split(".")[0], tf.extractfile(jpg).read(), int(tf.extractfile(cls).read()))
                )
    return rows


def test_labels_follow_sorted_class_names(tree, tmp_path):
    root, expected = tree
    m = pack_imagefolder(root, tmp_path / "out", shard_bytes=20_000)
    assert m.class_names == CLASSES and m.classes == 3
    rows = read(tmp_path / "out")
    assert [k for k, _, _ in rows] == [f"{i:06d}" for i in range(len(expected))]
    assert sorted(data for _, data, _ in rows) == sorted(expected)  # every image exactly once
    for _, data, label in rows:
        assert CLASSES[label] == expected[data]
    assert m.num_samples == len(expected) and len(m.shards) >= 2
    skipped = {f["path"]: f["why"] for f in m.source["skipped_files"]}
    assert m.source["skipped"] == 4 and skipped == {
        f"{CLASSES[0]}/README.txt": "not a .jpg/.jpeg name (.txt)",
        f"{CLASSES[1]}/fake.JPEG": "PNG data under a JPEG name",
        f"{CLASSES[2]}/empty.jpg": "empty file",
        f"{CLASSES[2]}/notes.jpg": "text, not image data",
    }
    # every key leads back to the file it was packed from, and that file holds the same bytes
    keymap = dict(line.split("\t") for line in (tmp_path / "out" / "keymap.tsv").read_text().splitlines())
    for key, data, _ in rows:
        assert (root / "train" / keymap[key]).read_bytes() == data
    assert verify(tmp_path / "out", m) == []
    assert (tmp_path / "out" / "train-000000.idx").read_text().startswith("v1.2 ")


def test_order_shuffled_by_seed_or_sorted(tree, tmp_path):
    root, _ = tree
    a = pack_imagefolder(root / "train", tmp_path / "a", seed=0)
    b = pack_imagefolder(root, tmp_path / "b", seed=0)  # parent of train/ works too
    s = pack_imagefolder(root, tmp_path / "s", seed=None)
    assert a.shards == b.shards  # deterministic
    labels_sorted = [label for _, _, label in read(tmp_path / "s")]
    assert labels_sorted == sorted(labels_sorted)
    assert [label for _, _, label in read(tmp_path / "a")] != labels_sorted
    assert s.source["order"] == "sorted" and a.source["order"] == "shuffled"


def test_empty_or_missing_tree_names_the_path(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackError, match="empty"):
        pack_imagefolder(tmp_path / "empty", tmp_path / "out")
    (tmp_path / "noimg" / "train" / "cat").mkdir(parents=True)
    (tmp_path / "noimg" / "train" / "cat" / "a.txt").write_text("x")
    with pytest.raises(PackError, match="noimg"):
        pack_imagefolder(tmp_path / "noimg", tmp_path / "out")
    with pytest.raises(PackError, match="nowhere"):
        pack_imagefolder(tmp_path / "nowhere", tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_the_cli_says_what_it_skipped_and_the_shard_size_it_chose(iobench, tree, tmp_path):
    root, _ = tree
    proc = iobench("dataset", "pack", root, "--out", tmp_path / "o")
    out = " ".join(proc.stdout.split())
    assert proc.returncode == 0, proc.stderr
    assert "skipped 4 file(s):" in out and "fake.JPEG: PNG data under a JPEG name" in out
    assert "empty.jpg: empty file" in out and "README.txt: not a .jpg/.jpeg name (.txt)" in out
    # no --shard-size: at least 4 shards per usable core, and it says so
    cores = usable_cores()
    shards = json.loads((tmp_path / "o" / "manifest.json").read_text())["shards"]
    assert len(shards) >= min(4 * cores, 8), shards  # 8 images: never more shards than samples
    assert f"chosen for {len(shards)} shard(s): at least 4 per usable core ({cores} here)" in out
    assert "--shard-size sets it" in out
    proc = iobench("dataset", "pack", root, "--out", tmp_path / "p", "--shard-size", "128MB")
    assert proc.returncode == 0, proc.stderr
    assert "chosen" not in proc.stdout
    assert len(json.loads((tmp_path / "p" / "manifest.json").read_text())["shards"]) == 1
