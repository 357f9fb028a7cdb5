"""Tier registry, config validation and the local tier's cache control."""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import iobench.tiers as tiers
from iobench.results.codec import to_json
from iobench.tiers import (
    CacheState,
    Tier,
    TierConfigError,
    available_tiers,
    get_tier_class,
    make_tier,
    register_tier,
)
from iobench.tiers.local import LocalTier

MIB = 1 << 20
linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="page-cache residency is Linux-only"
)


@dataclass
class _Shard:
    name: str
    bytes: int
    samples: int
    sha256: str


class _FakeManifest:
    """Only the attributes the tier contract allows: .shards and .shard_paths(dir)."""

    def __init__(self, shards: list[_Shard]) -> None:
        self.shards = shards

    def shard_paths(self, directory: str) -> list[str]:
        return [os.path.join(directory, s.name) for s in self.shards]


@pytest.fixture
def dataset(tmp_path):
    shards = []
    for i in range(4):
        name = f"train-{i:06d}.tar"
        data = os.urandom(4 * MIB)
        with open(tmp_path / name, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        shards.append(_Shard(name, len(data), 100, "0" * 64))
    return tmp_path, _FakeManifest(shards)


@pytest.fixture
def registry(monkeypatch):
    """Isolate registrations (and resolved-class caching) to one test."""
    monkeypatch.setattr(tiers.TIERS, "_registered", dict(tiers.TIERS._registered))
    return tiers.TIERS


# --- local tier: cache control -------------------------------------------------------------


@linux_only
def test_prepare_cold_warm_as_is(dataset):
    root, manifest = dataset
    tier = make_tier({"kind": "local", "path": str(root)})

    cold = tier.prepare(manifest, "cold")
    assert isinstance(cold, CacheState)
    assert (cold.requested, cold.achieved) == ("cold", "cold")
    assert cold.method == "posix_fadvise(DONTNEED)"
    assert cold.total_bytes == 16 * MIB
    assert cold.resident_fraction_before <= 0.05
    assert "page cache" in cold.note

    as_is = tier.prepare(manifest, "as-is")
    assert (as_is.achieved, as_is.method) == ("cold", "none")

    warm = tier.prepare(manifest, "warm")
    assert (warm.achieved, warm.method) == ("warm", "read-through")
    assert warm.resident_bytes_before >= 0.95 * 16 * MIB

    assert tier.prepare(manifest, "as-is").achieved == "warm"
    json.dumps(to_json(warm))  # goes into the cell manifest


@linux_only
def test_cold_with_pinned_pages_is_partly_cold(dataset):
    # Pages mapped by a process survive posix_fadvise(DONTNEED): the tier must say so
    # rather than claim a cold run.
    root, manifest = dataset
    tier = LocalTier(path=str(root))
    with contextlib.ExitStack() as stack:
        for path in manifest.shard_paths(str(root))[:2]:
            f = stack.enter_context(open(path, "rb"))
            m = stack.enter_context(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ))
            for off in range(0, len(m), mmap.PAGESIZE):
                m[off]  # fault every page in
        state = tier.prepare(manifest, "cold")
    assert state.achieved == "partly-cold"
    assert 0.4 <= state.resident_fraction_before <= 0.6
    assert "stayed in the page cache" in state.note
    assert tier.prepare(manifest, "cold").achieved == "cold"  # once unmapped, eviction works


def test_prepare_rejects_bad_cache_mode_and_missing_shards(dataset):
    root, manifest = dataset
    tier = LocalTier(path=str(root))
    with pytest.raises(TierConfigError, match=r"'hot'.*'cold'"):
        tier.prepare(manifest, "hot")
    os.remove(root / "train-000002.tar")
    with pytest.raises(FileNotFoundError, match=r"train-000002\.tar"):
        tier.prepare(manifest, "cold")


def test_urls_and_describe(dataset):
    root, manifest = dataset
    tier = LocalTier(path=str(root), name="in1k-small")
    assert tier.dataset_dir_or_url() == str(root)
    urls = tier.shard_urls(manifest)
    assert urls == [str(root / s.name) for s in manifest.shards]
    assert all(os.path.isabs(u) for u in urls)
    assert tier.storage_options() == {}
    desc = tier.describe()
    json.dumps(desc)
    assert desc["kind"] == "local" and desc["name"] == "in1k-small"
    assert desc["capacity_bytes"] >= desc["free_bytes"] >= desc["available_bytes"] >= 0
    storage = desc["storage"]
    mp = storage["mount_point"]
    assert str(root) == mp or str(root).startswith(mp.rstrip("/") + "/")
    assert storage["fs_type"]


# --- local tier: configuration errors ------------------------------------------------------


def test_missing_path_error_names_it(tmp_path):
    missing = tmp_path / "no-such-dataset"
    with pytest.raises(TierConfigError, match=r"does not exist") as info:
        make_tier({"kind": "local", "path": str(missing)})
    assert str(missing) in str(info.value)


def test_path_that_is_a_file_is_rejected(tmp_path):
    # "Unreadable" as root cannot be made with chmod (root bypasses it), so this checks a
    # path that cannot be read as a dataset directory because it is a file.
    shard = tmp_path / "train-000000.tar"
    shard.write_bytes(b"x")
    with pytest.raises(TierConfigError, match=r"not a directory") as info:
        LocalTier(path=str(shard))
    assert str(shard) in str(info.value)


def _as_nobody(path: str) -> str:
    """Build a LocalTier in a child that drops to "nobody" after importing iobench.

    Root reads any directory whatever its mode; the venv need not be readable by nobody.
    """
    code = textwrap.dedent(
        f"""
        import os, sys
        from iobench.tiers.base import TierConfigError
        from iobench.tiers.local import LocalTier
        if os.geteuid() == 0:
            os.setgid(65534); os.setuid(65534)
        try:
            LocalTier(path={path!r})
        except TierConfigError as exc:
            print(exc); sys.exit(0)
        sys.exit("accepted a directory it cannot read")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_unreadable_directory_and_unreachable_path_are_rejected():
    base = Path(tempfile.mkdtemp(prefix="iobench-perm-"))
    try:
        base.chmod(0o755)
        locked = base / "locked"
        (locked / "inner").mkdir(parents=True)
        locked.chmod(0)
        message = _as_nobody(str(locked))
        assert "not readable" in message and str(locked) in message
        message = _as_nobody(str(locked / "inner"))
        assert "not reachable" in message and "parent directory" in message
    finally:
        locked.chmod(0o755)
        shutil.rmtree(base)


def test_config_errors_name_key_value_and_allowed(tmp_path):
    with pytest.raises(TierConfigError) as info:
        make_tier({"kind": "local", "path": str(tmp_path), "pth": "/x"})
    msg = str(info.value)
    assert "'pth'" in msg and "'/x'" in msg and "drop_caches, name, path" in msg

    with pytest.raises(TierConfigError, match=r"'path' has value 42 of type int; expected str"):
        make_tier({"kind": "local", "path": 42})
    with pytest.raises(TierConfigError, match=r"'drop_caches'.*expected bool"):
        make_tier({"kind": "local", "path": str(tmp_path), "drop_caches": "yes"})
    with pytest.raises(TierConfigError, match=r"missing required option.*path: dataset directory"):
        make_tier({"kind": "local"})
    with pytest.raises(TierConfigError, match=r"no 'kind'.*local"):
        make_tier({"path": str(tmp_path)})
    with pytest.raises(TierConfigError, match=r"must be a mapping"):
        make_tier(["local"])


# --- registry ------------------------------------------------------------------------------


def test_unknown_tier_lists_known(registry):
    with pytest.raises(ValueError, match=r"unknown tier .nfs.*known tiers are .*local") as info:
        get_tier_class("nfs")
    assert "local" in str(info.value)
    with pytest.raises(TierConfigError, match=r"unknown tier 'nfs'"):
        make_tier({"kind": "nfs"})


def test_builtin_import_string_resolves(registry):
    assert "local" in available_tiers()
    assert get_tier_class("local") is LocalTier
    assert registry.known()["local"].target is LocalTier  # resolved once, then kept


def test_missing_dependency_shows_install_hint(registry):
    register_tier(
        "s3fake",
        "iobench_missing_dep_xyz.s3:S3Tier",
        install_hint="pip install 'iobench[s3]'",
    )
    with pytest.raises(ImportError, match=r"tier 's3fake'.*pip install 'iobench\[s3\]'"):
        get_tier_class("s3fake")


def test_register_class_and_clobber(registry, tmp_path):
    class RamTier(LocalTier):
        kind = "ram"

    register_tier("ram", RamTier)
    assert get_tier_class("ram") is RamTier
    assert isinstance(make_tier({"kind": "ram", "path": str(tmp_path)}), RamTier)
    with pytest.raises(ValueError, match=r"already registered.*clobber=True"):
        register_tier("ram", "x.y:Z")
    register_tier("ram", "iobench.tiers.local:LocalTier", clobber=True)
    assert get_tier_class("ram") is LocalTier
    with pytest.raises(TypeError):
        register_tier("bad", dict)
    with pytest.raises(ValueError, match=r"package\.module:Name"):
        register_tier("bad", "no_colon")


def test_entry_point_plugin(registry, tmp_path, monkeypatch):
    # A real installed-distribution layout on sys.path, found by importlib.metadata.
    (tmp_path / "fakeplug_tier.py").write_text(
        textwrap.dedent(
            """
            from iobench.tiers.local import LocalTier

            class PlugTier(LocalTier):
                kind = "plug"

            NotATier = object
            """
        )
    )
    dist = tmp_path / "fakeplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[iobench.tiers]\n"
        "plug = fakeplug_tier:PlugTier\n"
        "notatier = fakeplug_tier:NotATier\n"
        "broken = fakeplug_missing_module:X\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    assert {"plug", "notatier", "broken", "local"} <= set(available_tiers())
    cls = get_tier_class("plug")
    assert issubclass(cls, Tier) and cls.kind == "plug"
    assert type(make_tier({"kind": "plug", "path": str(tmp_path)})).__name__ == "PlugTier"
    with pytest.raises(TypeError, match=r"not a Tier subclass"):
        get_tier_class("notatier")
    with pytest.raises(ImportError, match=r"entry point 'fakeplug_missing_module:X'"):
        get_tier_class("broken")
