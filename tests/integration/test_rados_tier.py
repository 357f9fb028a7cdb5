"""RADOS through librados against the session's real Ceph lab: fsspec filesystem, staging, tier.

Needs Debian's python3-rados for this interpreter; the lab fixture skips (fails under CI)
when Ceph itself is not installed.
"""

from __future__ import annotations

import hashlib
import os
import uuid

import fsspec
import pytest

from iobench.datasets.manifest import Manifest
from iobench.tiers import make_tier
from loaders import ShardLoader
from tests.helpers.faultkit import dataset_pairs
from tests.helpers.shardkit import key_label_pairs


@pytest.fixture(scope="module", autouse=True)
def _disconnect_before_the_lab_goes():
    # module teardown runs before the session lab stops: librados must not outlive its cluster
    yield
    from iobench.ceph.connection import shutdown_all

    shutdown_all()


@pytest.fixture(scope="module")
def rfs(ceph_lab):
    from iobench.ceph.radosfs import RadosFileSystem, register

    register()
    fs = fsspec.filesystem("rados", conffile=str(ceph_lab.conf))
    assert isinstance(fs, RadosFileSystem)
    fs.mkdir("rfs-test")
    return fs


@pytest.fixture(scope="module")
def staged(ceph_lab, tiny_dataset):
    from iobench.ceph.upload import upload_rados

    url = "rados://iobench-data/tiny"
    report = upload_rados(tiny_dataset, url, conffile=str(ceph_lab.conf), verify="full")
    return url, report


def test_filesystem_round_trip(rfs):
    base = f"rfs-test/{uuid.uuid4().hex[:8]}"
    data = os.urandom(300_000)
    rfs.pipe_file(f"rados://{base}/d/a.bin", data)
    rfs.pipe_file(f"{base}/b.bin", b"0123456789")
    assert rfs.cat_file(f"rados://{base}/d/a.bin") == data
    assert rfs.cat_file(f"{base}/d/a.bin", 1000, 2000) == data[1000:2000]
    assert rfs.cat_file(f"{base}/d/a.bin", -5) == data[-5:]
    assert rfs.cat_file(f"{base}/b.bin", 3, -2) == b"34567"
    assert rfs.cat_file(f"{base}/b.bin", 8, 100) == b"89"
    info = rfs.info(f"rados://{base}/d/a.bin")
    assert info["type"] == "file" and info["size"] == len(data) and info["mtime"] > 1e9
    assert rfs.info(f"{base}/d")["type"] == "directory"
    assert rfs.ls(base, detail=False) == [f"{base}/d", f"{base}/b.bin"]
    assert sorted(rfs.find(base)) == [f"{base}/b.bin", f"{base}/d/a.bin"]
    with rfs.open(f"{base}/w.bin", "wb") as f:  # buffered writer: one write_full on close
        f.write(b"x" * 5000)
        f.write(b"y")
    with fsspec.open(f"rados://{base}/w.bin", "rb", conffile=rfs.conffile) as f:
        assert f.read() == b"x" * 5000 + b"y"
    rfs.rm(base, recursive=True)
    assert rfs.find(base) == []
    with pytest.raises(FileNotFoundError):
        rfs.cat_file(f"{base}/b.bin")
    with pytest.raises(FileNotFoundError):
        rfs.info(f"{base}/nothing")


def test_missing_pool_and_oversized_object_give_clear_errors(rfs, monkeypatch):
    with pytest.raises(FileNotFoundError, match="pool 'no-such-pool' does not exist"):
        rfs.cat_file("rados://no-such-pool/key")
    from iobench.ceph.connection import ObjectTooLargeError

    monkeypatch.setattr(type(rfs), "max_object_size", lambda self: 1000)
    with pytest.raises(ObjectTooLargeError, match=r"osd_max_object_size.*--shard-size"):
        rfs.pipe_file("rfs-test/too-big", b"z" * 1001)


def test_large_objects_are_written_in_pieces(rfs, monkeypatch):
    import iobench.ceph.radosfs as radosfs

    monkeypatch.setattr(radosfs, "IO_CHUNK", 1000)  # exercise the multi-op path with small data
    data = os.urandom(3500)
    rfs.write_object("rfs-test/pieces", data, {"iobench.sha256": b"abc"})
    assert rfs.cat_file("rfs-test/pieces") == data
    assert rfs.cat_file("rfs-test/pieces", 900, 2100) == data[900:2100]
    assert rfs.get_xattr("rfs-test/pieces", "iobench.sha256") == b"abc"


def test_stage_read_back_and_idempotent(ceph_lab, staged, tiny_dataset):
    from iobench.ceph.radosfs import RadosFileSystem
    from iobench.ceph.upload import upload_rados

    url, report = staged
    manifest = Manifest.load(tiny_dataset)
    assert len(report.uploaded) + len(report.skipped) >= len(manifest.shards)
    fs = RadosFileSystem(conffile=str(ceph_lab.conf))
    for entry in manifest.shards:
        assert hashlib.sha256(fs.cat_file(f"{url}/{entry.name}")).hexdigest() == entry.sha256
    again = upload_rados(tiny_dataset, url, conffile=str(ceph_lab.conf))
    assert again.uploaded == [] and again.bytes_uploaded == 0
    tier = make_tier({"kind": "rados", "url": url, "conffile": str(ceph_lab.conf)})
    assert tier.load_manifest() == manifest


def test_loader_reads_the_same_samples_as_local(ceph_lab, staged, tiny_dataset, tmp_path):
    url, _ = staged
    tier = make_tier(
        {"kind": "rados", "url": url, "conffile": str(ceph_lab.conf), "cache_dir": str(tmp_path / "c")}
    )
    manifest = tier.load_manifest()
    expected = dataset_pairs(tiny_dataset)  # read straight from the tars, not by a loader
    assert len(expected) == manifest.num_samples
    loader = ShardLoader(
        tier.shard_urls(manifest),
        storage_options=tier.storage_options(),
        deadline_s=tier.deadline_s,
        workers=2,
        return_batches=True,
    )
    assert key_label_pairs(loader) == expected  # forked workers reconnect to the cluster

    # the local shard cache, filled through ObjectReader over rados://
    assert tier.prepare(manifest, "warm").achieved == "warm"
    assert tier.prepare(manifest, "cold").achieved == "cold"


def test_describe_shows_the_lab(ceph_lab, staged):
    url, _ = staged
    d = make_tier({"kind": "rados", "url": url, "conffile": str(ceph_lab.conf)}).describe()
    cluster = d["cluster"]
    assert cluster["reachable"] and cluster["version_short"].startswith("16.")
    assert cluster["osds"]["total"] == 1 and cluster["osds"]["up"] == 1
    assert cluster["osds"]["objectstore"] == ["memstore"]
    pool = cluster["pool"]
    assert pool["size"] == 1 and pool["applications"] == ["iobench"] and pool["pg_num"] > 0
    assert "secret" not in str(d).lower()


def test_import_rados_failure_gives_the_install_hint(tmp_path, monkeypatch):
    import sys

    from iobench.ceph import client as cephclient

    monkeypatch.delitem(sys.modules, "rados", raising=False)
    monkeypatch.setattr(
        cephclient.importlib, "import_module", lambda n: (_ for _ in ()).throw(ImportError(n))
    )
    with pytest.raises(ImportError, match="apt-get install -y --no-install-recommends python3-rados"):
        cephclient.import_rados(tmp_path)


def test_the_cluster_is_found_as_the_ceph_tools_find_it(ceph_lab, staged, monkeypatch, tmp_path):
    """No conffile and no CEPH_CONF: librados' own search finds ./ceph.conf; CEPH_ARGS is honoured;
    the tier's keyring overrides the configuration's."""
    url, _ = staged
    monkeypatch.delenv("CEPH_CONF", raising=False)
    monkeypatch.chdir(ceph_lab.conf.parent)  # the lab's ceph.conf: librados reads ./ceph.conf
    tier = make_tier({"kind": "rados", "url": url})
    assert tier.load_manifest().num_samples > 0
    assert tier.describe()["conffile"] == "librados' default ceph.conf"
    # CEPH_ARGS as the ceph tools take it (--conf, --cluster, --name/--id, --keyring; the rest to librados)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CEPH_ARGS", f"--conf {ceph_lab.conf}")
    assert make_tier({"kind": "rados", "url": url, "deadline_s": 10}).load_manifest().num_samples > 0
    # the tier's keyring overrides the one the configuration names: a wrong key is refused
    bad = tmp_path / "keyring"
    bad.write_text("[client.admin]\n\tkey = AQAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAA==\n")
    with pytest.raises(OSError):
        make_tier({"kind": "rados", "url": url, "keyring": str(bad), "deadline_s": 5}).load_manifest()
    # nothing to find: a clear error naming where librados looked
    monkeypatch.delenv("CEPH_ARGS")
    with pytest.raises(
        OSError, match=r"no ceph config found for cluster 'ceph': librados looked in \$CEPH_CONF"
    ):
        make_tier({"kind": "rados", "url": url}).load_manifest()
