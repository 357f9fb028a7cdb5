"""Manifest load errors, verify() and atomic writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, ManifestError, build_manifest, verify
from iobench.datasets.shardwriter import ShardWriter
from iobench.host.atomic import atomic_write, atomic_write_json


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, Manifest]:
    with ShardWriter(tmp_path, 8_000) as w:
        for i in range(10):
            w.add(f"{i:06d}", [("jpg", bytes([i]) * 1500), ("cls", str(i).encode())])
    m = build_manifest(
        w.entries, classes=1000, class_names=None, source={"generator": "test"}, jpeg_bytes=15000
    )
    m.save(tmp_path)
    return tmp_path, m


def test_roundtrip(dataset):
    root, m = dataset
    loaded = Manifest.load(root)
    assert loaded == m
    assert len(m.shards) >= 3 and m.num_samples == 10
    assert m.mean_sample_bytes == pytest.approx(m.total_bytes / 10)
    assert loaded.shard_paths(root) == [root / s.name for s in m.shards]


def test_missing_manifest_names_file(tmp_path):
    with pytest.raises(ManifestError, match=re.escape(str(tmp_path / MANIFEST_NAME))):
        Manifest.load(tmp_path)


def test_bad_json_names_file(tmp_path):
    (tmp_path / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(ManifestError, match=re.escape("manifest.json: not valid JSON")):
        Manifest.load(tmp_path)


@pytest.mark.parametrize(
    ("mutate", "key"),
    [
        (lambda d: d.pop("num_samples"), "missing key 'num_samples'"),
        (lambda d: d.update(total_bytes="12"), "key 'total_bytes' must be int"),
        (lambda d: d["shards"][1].pop("sha256"), r"missing key 'shards\[1\].sha256'"),
        (lambda d: d["shards"][0].update(bytes=True), r"key 'shards\[0\].bytes' must be int"),
        (lambda d: d.update(schema_version=99), "key 'schema_version' is 99"),
        (lambda d: d.update(num_samples=11), "key 'num_samples' disagrees"),
        (lambda d: d.update(class_names=[1, 2]), "key 'class_names'"),
    ],
)
def test_malformed_manifest_names_file_and_key(dataset, mutate, key):
    root, _ = dataset
    path = root / MANIFEST_NAME
    raw = json.loads(path.read_text())
    mutate(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(ManifestError, match=key) as info:
        Manifest.load(root)
    assert str(path) in str(info.value)


def test_verify_detects_truncation_sha_and_missing(dataset):
    root, m = dataset
    assert verify(root, m) == []
    first, second, third = m.shard_paths(root)[:3]
    with open(first, "r+b") as f:
        f.truncate(first.stat().st_size - 512)
    data = bytearray(second.read_bytes())
    data[600] ^= 0xFF  # same size, different content
    second.write_bytes(bytes(data))
    third.unlink()
    problems = verify(root, m)
    assert len(problems) == 3
    assert "size" in problems[0] and first.name in problems[0]
    assert "sha256" in problems[1] and second.name in problems[1]
    assert "missing shard" in problems[2] and third.name in problems[2]
    # without hashing only the size problems are visible
    assert len(verify(root, m, check_sha=False)) == 2


def test_verify_reports_missing_index(dataset):
    root, m = dataset
    m.shard_paths(root)[0].with_suffix(".idx").unlink()
    assert [p for p in verify(root, m) if "index" in p]


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "x.json"
    atomic_write_json(target, {"a": 1})
    with pytest.raises(RuntimeError), atomic_write(target, "w") as f:
        f.write("half")
        raise RuntimeError
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
