"""The one-object-per-sample layout: made from the shards, staged beside them, read on every path."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from iobench.cell.inputs import loader_inputs
from iobench.datasets.manifest import Manifest
from iobench.datasets.objects import INDEX_NAME, explode
from iobench.datasets.upload import upload_s3
from iobench.results.spec import LoaderSettings
from iobench.tiers import make_tier
from loaders import ShardLoader


@pytest.fixture(scope="module")
def objects_dataset(iobench, tiny_dataset, tmp_path_factory) -> Path:
    # a copy: the shared tiny dataset must keep the shards-only layout for the other tests
    root = tmp_path_factory.mktemp("objects") / "ds"
    shutil.copytree(tiny_dataset, root)
    # made the way the README says: `iobench dataset objects DATASET`
    proc = iobench("dataset", "objects", root, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "256 objects" in proc.stdout and "objects; `iobench dataset upload` uploads them" in proc.stdout
    return root


def _pairs(loader):
    return sorted((k, int(label)) for b in loader for k, label in zip(b.keys, b.labels.tolist(), strict=True))


def _read(tier, layout, workers=1):
    manifest = tier.load_manifest()
    items, source = loader_inputs(
        tier, manifest, LoaderSettings(kind="torch", workers=0, batch_size=8, layout=layout)
    )
    if layout == "objects":
        loader = ShardLoader(objects=items, workers=workers, return_batches=True, source=source)
    else:
        loader = ShardLoader(items, workers=workers, return_batches=True, source=source)
    return _pairs(loader), loader


def test_explode_writes_every_sample_once_with_its_label(objects_dataset):
    index = json.loads((objects_dataset / INDEX_NAME).read_text())["samples"]
    assert len(index) == 256 and len({s["key"] for s in index}) == 256
    assert sum(s["bytes"] for s in index) == sum(
        (objects_dataset / "objects" / s["name"]).stat().st_size for s in index
    )
    assert explode(objects_dataset) == index  # idempotent


def test_local_objects_layout_reads_the_same_samples_as_the_shards(objects_dataset):
    tier = make_tier({"kind": "local", "path": str(objects_dataset)})
    shards, _ = _read(tier, "shards")
    objects, loader = _read(tier, "objects", workers=2)
    assert objects == shards and len(objects) == 256
    assert loader.stats.wall_s["fetch"] > 0


def test_objects_on_s3_and_rados_match_and_count_one_request_per_sample(
    ceph_lab, objects_dataset, monkeypatch
):
    for key, value in ceph_lab.env.items():
        monkeypatch.setenv(key, value)
    expected, _ = _read(make_tier({"kind": "local", "path": str(objects_dataset)}), "shards")
    s3_url = f"s3://iobench-{uuid.uuid4().hex[:8]}/objects"
    report = upload_s3(objects_dataset, s3_url, workers=8)
    shards = len(Manifest.load(objects_dataset).shards)
    assert len(report.uploaded) == 2 * shards + 256 + 1  # shards + idx, objects, index
    rados = make_tier({"kind": "rados", "url": f"rados://iobench-{uuid.uuid4().hex[:6]}/objects"})
    rados.upload_dataset(str(objects_dataset))
    for tier in (make_tier({"kind": "s3", "url": s3_url}), rados):
        got, loader = _read(tier, "objects", workers=1)
        assert got == expected, tier.kind
        requests = loader.stats.counters.requests
        assert requests is not None and requests.requests == 256 and requests.retries == 0
        assert loader.stats.as_dict()["request_latency_ms"]["p99"] > 0
    if ceph_lab.mount:  # CephFS: the same files through the mount, both layouts
        cephfs = make_tier({"kind": "cephfs", "path": f"{ceph_lab.mount}/objects-{uuid.uuid4().hex[:6]}"})
        cephfs.upload_dataset(str(objects_dataset))
        for layout in ("shards", "objects"):
            got, _ = _read(cephfs, layout, workers=1)
            assert got == expected, f"cephfs {layout}"


def test_a_ram_cache_smaller_than_the_dataset_stays_within_its_limit(ceph_lab, tiny_dataset):
    from loaders.storage.shardcache import ShardCache

    url = f"rados://iobench-{uuid.uuid4().hex[:6]}/ram"
    limit = 12_000_000  # about a third of the dataset
    tier = make_tier(
        {"kind": "rados", "url": url, "conffile": str(ceph_lab.conf), "memory_cache": limit, "upload": True}
    )
    tier.upload_dataset(str(tiny_dataset))
    assert tier.cache_dir.startswith("/dev/shm/") and tier.describe()["cache"]["medium"] == "RAM (tmpfs)"
    tier.prepare(tier.load_manifest(), "cold")
    pairs, loader = _read(tier, "shards", workers=2)
    again, second = _read(tier, "shards", workers=2)
    assert len(pairs) == 256 and again == pairs
    # the persistent workers read ahead into the next epoch, through the cache: stopped first, so
    # that none writes into the cache while it is measured and removed
    loader.close()
    second.close()
    used = ShardCache(tier.cache_dir, limit).used_bytes()
    shutil.rmtree(tier.cache_dir)  # tmpfs is RAM: give it back
    assert 0 < used <= limit
    shards = len(Manifest.load(tiny_dataset).shards)
    # the cache cannot hold the dataset, so it is static (auto): it keeps what it admitted first and
    # reads the rest through, never evicting; the second pass hits what was kept
    first, kept = loader.stats.counters.cache, second.stats.counters.cache
    assert tier.describe()["cache"]["policy"] == "static"
    assert first is not None and kept is not None
    assert first.misses == shards and first.evictions == 0 and first.bypassed > 0
    assert kept.hits > 0 and kept.evictions == 0
