"""The shard cache: LRU accounting, verification, error paths, and real multi-process sharing."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaders.observe import CacheHealthCounts
from loaders.storage.shardcache import CacheError, CacheStats, ShardCache, StoreChecksumError, choose_policy
from tests.helpers.paths import ROOT as REPO

LOADERS_DIR = str(REPO / "loaders")


def payload(url: str, size: int) -> bytes:
    """Deterministic bytes for a url, so every process can check what it got."""
    seed = hashlib.sha256(url.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def writer(size: int, calls: list | None = None):
    def fetch(url: str, f) -> None:
        if calls is not None:
            calls.append(url)
        f.write(payload(url, size))

    return fetch


def complete_bytes(directory: str | Path) -> int:
    """Bytes of complete entries, listed independently of the implementation's own scan."""
    return sum(p.stat().st_size for p in Path(directory).iterdir() if not p.name.startswith("."))


def parts(directory: str | Path) -> list[str]:
    return [p.name for p in Path(directory).iterdir() if p.name.startswith(".part-")]


# ---- single process ---------------------------------------------------------------------------


def test_hit_miss_eviction_counts_and_lru_order(tmp_path):
    cache = ShardCache(tmp_path / "c", max_bytes=300)
    calls: list[str] = []
    for u in ("s3://b/a.tar", "s3://b/b.tar", "s3://b/c.tar"):
        cache.get(u, writer(100, calls), size=100)
    assert cache.get("s3://b/a.tar", writer(100, calls), size=100)  # hit makes a the newest
    path_d = cache.get("s3://b/d.tar", writer(100, calls), size=100)  # must evict b, the oldest

    assert calls == ["s3://b/a.tar", "s3://b/b.tar", "s3://b/c.tar", "s3://b/d.tar"]
    assert [cache.contains(f"s3://b/{k}.tar") for k in "abcd"] == [True, False, True, True]
    assert Path(path_d).read_bytes() == payload("s3://b/d.tar", 100)
    assert cache.stats == CacheStats(hits=1, misses=4, evictions=1, bytes_fetched=400, bytes_evicted=100)
    assert cache.used_bytes() == complete_bytes(tmp_path / "c") == 300


def test_a_static_cache_keeps_what_it_has_and_reads_the_rest_through(tmp_path):
    cache = ShardCache(tmp_path / "c", max_bytes=300, policy="static")
    calls: list[str] = []
    urls = [f"s3://b/{k}.tar" for k in "abcdef"]
    got = [cache.get(u, writer(100, calls), size=100) for u in urls]
    # the first three fit and are kept; the rest are not downloaded into the cache at all
    assert [g is not None for g in got] == [True, True, True, False, False, False]
    assert calls == urls[:3] and parts(tmp_path / "c") == []
    assert cache.stats == CacheStats(hits=0, misses=6, bytes_fetched=300, bypassed=3)
    # every later epoch: the same three hit, nothing is evicted, the others read through
    cache.reset_stats()
    for u in reversed(urls):
        cache.get(u, writer(100, calls), size=100)
    assert cache.stats == CacheStats(hits=3, misses=3, bypassed=3) and len(calls) == 3
    assert complete_bytes(tmp_path / "c") == 300
    assert cache.open_shard(urls[5], writer(100, calls), size=100) is None
    with cache.open_shard(urls[0], writer(100, calls), size=100) as f:
        assert f.read() == payload(urls[0], 100)
    # a size it cannot reserve for is read through too
    assert ShardCache(tmp_path / "d", max_bytes=300, policy="static").get("s3://b/x", writer(10)) is None


def test_a_static_cache_rechecks_for_room_once_it_was_full(tmp_path, monkeypatch):
    import loaders.storage.shardcache as cache_module

    cache = ShardCache(tmp_path, max_bytes=100, policy="static")
    assert cache.get("a", writer(100), size=100) and cache.get("b", writer(100), size=100) is None
    cache.clear()  # room again: after the recheck interval the next miss is admitted
    assert cache.get("c", writer(100), size=100) is None  # still within the interval
    monkeypatch.setattr(cache_module, "_FULL_RECHECK_S", 0.0)
    cache._full_until = 0.0
    assert cache.get("c", writer(100), size=100) is not None


def test_auto_policy_is_static_only_for_a_dataset_larger_than_the_cache():
    assert choose_policy("auto", 100, 300) == "static"
    assert choose_policy("auto", 300, 300) == "lru" and choose_policy("auto", 100, None) == "lru"
    assert choose_policy("lru", 100, 300) == "lru"
    with pytest.raises(ValueError, match="cache policy 'fifo': expected auto, lru or static"):
        choose_policy("fifo", 1, 1)


def test_unknown_size_evicts_after_download(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=250)
    cache.get("u1", writer(100))
    cache.get("u2", writer(100))
    cache.get("u3", writer(100))  # size unknown: fetched, then u1 evicted before the commit
    assert not cache.contains("u1") and cache.contains("u2") and cache.contains("u3")
    assert complete_bytes(tmp_path) == 200 and parts(tmp_path) == []


def test_file_name_is_a_hash_plus_sanitised_suffix(tmp_path):
    cache = ShardCache(tmp_path / "c", max_bytes=10_000)
    for url, suffix in [
        ("s3://bucket/../../etc/train 0001.tar?versionId=../x", "train_0001.tar"),
        ("https://host/a/..", "shard"),
    ]:
        path = Path(cache.get(url, writer(10)))
        assert path.parent == tmp_path / "c"
        assert path.name == hashlib.sha256(url.encode()).hexdigest() + "-" + suffix


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 400), min_size=6, max_size=6),
    ops=st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=25),
)
def test_matches_an_lru_model_and_never_exceeds_the_limit(sizes, ops):
    limit = 600
    with tempfile.TemporaryDirectory() as d:
        cache = ShardCache(d, max_bytes=limit)
        model: OrderedDict[str, int] = OrderedDict()
        want = CacheStats()
        for i, known in ops:
            url, size = f"s3://b/s{i}.tar", sizes[i]
            if url in model:
                model.move_to_end(url)
                want.hits += 1
            else:
                while model and sum(model.values()) + size > limit:
                    _, gone = model.popitem(last=False)
                    want.evictions += 1
                    want.bytes_evicted += gone
                model[url] = size
                want.misses += 1
                want.bytes_fetched += size
            path = cache.get(url, writer(size), size=size if known else None)
            assert Path(path).read_bytes() == payload(url, size)
            assert complete_bytes(d) <= limit
            assert {u for u in model} == {
                f"s3://b/s{j}.tar" for j in range(6) if cache.contains(f"s3://b/s{j}.tar")
            }
        assert cache.stats == want
        assert parts(d) == []


def test_size_mismatch_caches_nothing(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=1000)
    with pytest.raises(CacheError, match=r"expected 100 bytes, got 99"):
        cache.get("u", writer(99), size=100)
    assert not cache.contains("u") and parts(tmp_path) == [] and complete_bytes(tmp_path) == 0
    assert cache.stats.misses == 0 and cache.stats.bytes_fetched == 0


def test_md5_etag_is_checked_and_multipart_etag_is_size_only(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=10_000)
    good = hashlib.md5(payload("u", 500)).hexdigest()
    bad = hashlib.md5(b"other").hexdigest()
    with pytest.raises(
        StoreChecksumError, match=f"does not match its MD5 .its ETag. .{bad}, the download's {good}"
    ):
        cache.get("u", writer(500), size=500, etag=f'"{bad}"')
    assert not cache.contains("u") and parts(tmp_path) == []
    cache.get("u", writer(500), size=500, etag=f'"{good.upper()}"')  # quoted, any case: as S3 sends it
    # a multipart ETag is an MD5 of part MD5s: cannot be checked against the bytes, size still is
    cache.get("v", writer(500), size=500, etag=f"{bad}-3")
    with pytest.raises(CacheError, match="size mismatch"):
        cache.get("w", writer(400), size=500, etag=f"{bad}-3")
    assert cache.contains("u") and cache.contains("v") and not cache.contains("w")


def test_shard_larger_than_the_cache(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=1000)
    calls: list[str] = []
    with pytest.raises(
        CacheError, match=r"s3://b/big\.tar: shard of 1001 bytes is larger than the whole cache \(1000"
    ):
        cache.get("s3://b/big.tar", writer(1001, calls), size=1001)
    assert calls == []  # known size: refused before downloading anything
    with pytest.raises(
        CacheError, match=r"shard of 1500 bytes is larger than the whole cache \(1000 bytes\)"
    ):
        cache.get("s3://b/big.tar", writer(1500, calls))
    assert calls == ["s3://b/big.tar"] and parts(tmp_path) == [] and complete_bytes(tmp_path) == 0


def test_directory_under_a_regular_file_is_a_clear_error(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(CacheError, match=r"cache directory .*file\.txt/cache.* is not usable"):
        ShardCache(tmp_path / "file.txt" / "cache", max_bytes=100)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges to nobody")
def test_directory_not_writable_for_an_unprivileged_user(tmp_path):
    # chmod does not stop root, so a child drops to uid 65534 (nobody) after its imports
    d = tmp_path / "ro"
    d.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    code = (
        _IMPORT_CACHE
        + "os.setuid(65534)\n"
        + "try:\n    ShardCache(sys.argv[1], 100)\nexcept CacheError as e:\n    print('ERR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=20)
    assert (
        out.stdout.startswith("ERR ") and "not usable" in out.stdout and "Permission denied" in out.stdout
    ), out


def test_enospc_evicts_and_retries_once(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=1000)
    cache.get("old1", writer(300))
    cache.get("old2", writer(300))
    tries = []

    def flaky(url, f):
        tries.append(url)
        f.write(b"p" * 150)  # a partial write that must not survive
        if len(tries) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        f.write(b"q" * 150)

    path = cache.get("new", flaky, size=300)
    assert tries == ["new", "new"] and Path(path).read_bytes() == b"p" * 150 + b"q" * 150
    assert not cache.contains("old1") and cache.contains("old2")  # the LRU entry made the room
    assert cache.stats.evictions == 1 and parts(tmp_path) == []


def test_enospc_twice_is_a_cache_error_and_leaves_nothing(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=1000)
    cache.get("old1", writer(300))
    cache.get("old2", writer(300))

    def full(url, f):
        f.write(b"p" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(CacheError, match=r"disk full \(ENOSPC\).*even after eviction") as info:
        cache.get("new", full, size=300)
    assert info.value.errno == errno.ENOSPC
    assert not cache.contains("new") and parts(tmp_path) == []
    with pytest.raises(CacheError, match="no cache entry could be evicted"):  # old2 went on try 1
        ShardCache(tmp_path / "empty", max_bytes=1000).get("x", full)
    assert parts(tmp_path / "empty") == []


def test_fetch_error_propagates_and_leaves_nothing(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=1000)

    def broken(url, f):
        f.write(b"half")
        raise ConnectionResetError("peer went away")

    with pytest.raises(ConnectionResetError):
        cache.get("u", broken, size=10)
    assert parts(tmp_path) == [] and not cache.contains("u")


def test_concurrent_threads_download_once_and_count_the_wait(tmp_path):
    # threads use separate open file descriptions, so flock excludes them like processes
    cache = ShardCache(tmp_path, max_bytes=10_000)
    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def slow(url, f):
        calls.append(url)
        f.write(b"a" * 50)
        started.set()
        release.wait(10)
        f.write(b"b" * 50)

    results: list[str] = []
    first = threading.Thread(target=lambda: results.append(cache.get("u", slow, size=100)))
    first.start()
    started.wait(10)
    second = threading.Thread(target=lambda: results.append(cache.get("u", slow, size=100)))
    second.start()
    second.join(0.2)
    assert second.is_alive()  # blocked on the key lock, not reading a partial file
    release.set()
    first.join(10)
    second.join(10)
    assert calls == ["u"] and len(set(results)) == 1
    assert Path(results[0]).read_bytes() == b"a" * 50 + b"b" * 50
    assert cache.stats.misses == 1 and cache.stats.hits == 1 and cache.stats.wait_s >= 0.15


def test_stats_reset_merge_and_clear(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=1000)
    cache.get("a", writer(10))
    cache.get("a", writer(10))
    epoch1 = cache.reset_stats()
    assert epoch1.as_dict() == dict(
        hits=1,
        misses=1,
        evictions=0,
        bytes_fetched=10,
        bytes_evicted=0,
        wait_s=0.0,
        bypassed=0,
        damaged=0,
        damaged_bytes=0,
        verified_bytes=0,
    )
    assert cache.stats == CacheStats()
    total = CacheStats()
    total.merge(epoch1)
    total.merge(epoch1)
    assert total.hits == 2 and total.bytes_fetched == 20
    cache.clear()
    assert not cache.contains("a") and cache.used_bytes() == 0 and os.listdir(tmp_path / ".locks") == []
    assert os.listdir(tmp_path / ".sums") == []


# ---- several real processes -------------------------------------------------------------------

# Children import loaders.storage.shardcache without running loaders/__init__ (which imports torch, ~4 s per
# process): the cache module uses only the standard library.
_IMPORT_CACHE = f"""
import hashlib, io, json, os, random, sys, types, fcntl
pkg = types.ModuleType("loaders"); pkg.__path__ = [{LOADERS_DIR!r}]; sys.modules["loaders"] = pkg
from loaders.storage.shardcache import CacheError, ShardCache
"""

_WORKER = (
    _IMPORT_CACHE
    + """
def payload(url, size):
    seed = hashlib.sha256(url.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]

args = json.loads(sys.argv[1])
cache = ShardCache(args["dir"], args["max_bytes"])
log = os.open(args["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

def fetch(url, f):
    os.write(log, (url + "\\n").encode())  # O_APPEND: one atomic line per download
    data = payload(url, args["sizes"][url])
    for i in range(0, len(data), 4096):  # several writes, so the others can catch a partial file
        f.write(data[i : i + 4096])
        f.flush()

def over_limit():
    # the limit is checked under the cache's global lock: a lock-free listing can see a file that
    # was evicted and the one that replaced it at once
    fd = os.open(os.path.join(args["dir"], ".lock"), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    used = sum(e.stat().st_size for e in os.scandir(args["dir"]) if not e.name.startswith("."))
    os.close(fd)
    return used > args["max_bytes"]

urls = list(args["sizes"])
random.Random(args["seed"]).shuffle(urls)
sys.stdin.readline()  # start together
digests, exceeded = {}, 0
for url in urls * args["rounds"]:
    f = cache.open_shard(url, fetch, size=args["sizes"][url])
    if f is None:  # read through, as the loaders' source does
        f = io.BytesIO()
        fetch(url, f)
        f.seek(0)
    with f:
        digests[url] = hashlib.sha256(f.read()).hexdigest()
    exceeded += over_limit()
print(json.dumps({"digests": digests, "exceeded": exceeded, "stats": cache.stats.as_dict()}))
"""
)


def run_workers(tmp_path, n: int, sizes: dict[str, int], max_bytes: int, rounds: int = 1) -> list[dict]:
    log = tmp_path / "fetch.log"
    procs = []
    for seed in range(n):
        args = dict(
            dir=str(tmp_path / "cache"),
            max_bytes=max_bytes,
            log=str(log),
            sizes=sizes,
            seed=seed,
            rounds=rounds,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, json.dumps(args)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    return outs


def test_processes_share_the_cache_and_download_each_shard_once(tmp_path):
    sizes = {f"s3://bucket/train-{i:06d}.tar": 20_000 + 3_000 * i for i in range(16)}
    outs = run_workers(tmp_path, 3, sizes, max_bytes=10**8)
    log = (tmp_path / "fetch.log").read_text().split()
    assert sorted(log) == sorted(sizes)  # every url downloaded exactly once in total
    want = {u: hashlib.sha256(payload(u, s)).hexdigest() for u, s in sizes.items()}
    assert all(o["digests"] == want for o in outs)
    merged = CacheStats()
    for o in outs:
        merged.merge(CacheStats(**o["stats"]))
    assert merged.misses == 16 and merged.hits == 32 and merged.bytes_fetched == sum(sizes.values())
    assert parts(tmp_path / "cache") == []


def test_processes_under_pressure_never_exceed_the_limit(tmp_path):
    sizes = {f"s3://bucket/s{i}.tar": 10_000 + 7_000 * i for i in range(8)}
    outs = run_workers(tmp_path, 3, sizes, max_bytes=100_000, rounds=2)
    want = {u: hashlib.sha256(payload(u, s)).hexdigest() for u, s in sizes.items()}
    assert all(o["digests"] == want for o in outs) and all(o["exceeded"] == 0 for o in outs)
    assert sum(o["stats"]["evictions"] for o in outs) > 0  # the cache really was under pressure
    assert complete_bytes(tmp_path / "cache") <= 100_000 and parts(tmp_path / "cache") == []


_HALF_THEN_HANG = (
    _IMPORT_CACHE
    + """
cache = ShardCache(sys.argv[1], 10_000)
def fetch(url, f):
    f.write(b"x" * 500)
    f.flush()
    print("half", flush=True)
    sys.stdin.readline()  # block here until killed
cache.get("s3://b/victim.tar", fetch, size=1000)
"""
)


def test_killed_download_leaves_no_entry_and_is_cleaned(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c", _HALF_THEN_HANG, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline() == "half\n"
        cache = ShardCache(tmp_path, max_bytes=10_000)
        assert not cache.contains("s3://b/victim.tar")
        [part] = parts(tmp_path)
        assert os.path.getsize(tmp_path / part) == 500
        cache.get("s3://b/other.tar", writer(100), size=100)  # a scan while the writer lives ...
        assert parts(tmp_path) == [part]  # ... keeps its temp file
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    assert not cache.contains("s3://b/victim.tar")
    calls: list[str] = []
    path = cache.get("s3://b/victim.tar", writer(1000, calls), size=1000)  # the dead lock is free
    assert calls == ["s3://b/victim.tar"] and Path(path).read_bytes() == payload("s3://b/victim.tar", 1000)
    assert parts(tmp_path) == []


def test_stale_temp_of_another_key_is_cleaned_by_any_scan(tmp_path):
    cache = ShardCache(tmp_path, max_bytes=10_000)
    stale = tmp_path / f".part-{'0' * 64}.999999.4000"  # writer long dead: nobody holds its key lock
    stale.write_bytes(b"z" * 100)
    cache.get("u", writer(7000), size=7000)  # would not fit if the dead reservation still counted
    assert not stale.exists() and cache.contains("u")


def test_global_lock_file_is_the_one_children_use(tmp_path):
    # the multi-process limit check above locks <dir>/.lock; make sure that is the cache's lock
    cache = ShardCache(tmp_path, max_bytes=1000)
    fd = os.open(tmp_path / ".lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    done = threading.Event()
    t = threading.Thread(target=lambda: (cache.used_bytes(), done.set()))
    t.start()
    assert not done.wait(0.2)
    os.close(fd)
    t.join(5)
    assert done.is_set()


def test_a_torn_entry_of_the_wrong_size_is_downloaded_again(tmp_path):
    # what a power cut can leave behind in a cache that does not fsync (durable=False)
    cache = ShardCache(tmp_path / "c", 10_000)
    calls = []

    def fetch(url, f):
        calls.append(url)
        f.write(b"x" * 100)

    Path(cache.path_for("s3://b/a.tar")).write_bytes(b"x" * 40)
    path = cache.get("s3://b/a.tar", fetch, size=100)
    assert calls == ["s3://b/a.tar"] and Path(path).read_bytes() == b"x" * 100
    assert cache.stats.misses == 1 and cache.stats.hits == 0
    cache.get("s3://b/a.tar", fetch, size=100)
    assert calls == ["s3://b/a.tar"] and cache.stats.hits == 1


# ---- entries checked at first open; a cache that degrades ---------------------------------------


@pytest.mark.parametrize("how", ["zeros", "flip", "cut", "no sums"])
def test_a_damaged_entry_is_found_at_first_open_evicted_and_fetched_again(tmp_path, how):
    body = os.urandom(3 * 2**20)
    calls: list[str] = []

    def fetch(url, f):
        calls.append(url)
        f.write(body)

    ShardCache(tmp_path, 10**9).get("s3://b/x.tar", fetch, size=len(body))
    cache = ShardCache(tmp_path, 10**9)  # another process: it has checked nothing yet
    path = Path(cache.path_for("s3://b/x.tar"))
    if how == "cut":
        os.truncate(path, 1000)
    elif how == "no sums":
        os.unlink(tmp_path / ".sums" / path.name[:64])
    else:
        with open(path, "r+b") as f:
            f.seek(2**20)
            f.write(bytes(10) if how == "zeros" else bytes(b ^ 1 for b in body[2**20 : 2**20 + 10]))
    with cache.open_shard("s3://b/x.tar", fetch, size=None if how == "cut" else len(body)) as f:
        assert f.read() == body
    assert cache.stats.damaged == 1 and len(calls) == 2 and len(cache.notes) == 1
    assert "s3://b/x.tar" in cache.notes[0] and "fetched again" in cache.notes[0]
    with cache.open_shard("s3://b/x.tar", fetch, size=len(body)) as f:  # checked once per process
        assert f.read(4) == body[:4]
    assert cache.stats.damaged == 1 and len(calls) == 2


def test_unverified_entries_and_ranges_check_what_is_asked(tmp_path):
    body = os.urandom(20 * 2**20)
    ShardCache(tmp_path, 10**9).get("s3://b/x.tar", lambda u, f: f.write(body), size=len(body))
    cache = ShardCache(tmp_path, 10**9)
    with cache.open_shard("s3://b/x.tar", None, size=len(body), start=9 * 2**20, end=9 * 2**20 + 10):
        pass
    assert cache.stats.verified_bytes == 8 * 2**20  # the one 8 MiB part that holds the range
    off = ShardCache(tmp_path, 10**9, verify=False)
    with off.open_shard("s3://b/x.tar", None, size=len(body)):
        pass
    assert off.stats.verified_bytes == 0


class _Store:
    """The opener under the cache, for its error paths: serves ``body`` for any URL."""

    def __init__(self, body: bytes, fail: BaseException | None = None) -> None:
        self.body, self.fail, self.downloads = body, fail, 0

    @contextlib.contextmanager
    def open(self, url, start=0, end=None):
        yield io.BytesIO(self.body[start:end])

    def download(self, url, out, size):
        self.downloads += 1
        if self.fail is not None:
            raise self.fail
        out.write(self.body)

    def drain_into(self, stats):
        pass

    def close(self):
        pass


def test_a_cache_that_cannot_be_used_is_read_around_said_once_and_counted(tmp_path):
    from loaders.observe.stages import StageStats
    from loaders.storage.layers import CacheOpener
    from loaders.storage.spec import CacheSpec, SourceSpec

    (tmp_path / "file").write_text("not a directory")
    spec = SourceSpec(cache=CacheSpec(str(tmp_path / "file" / "cache"), 10**9))
    opener = CacheOpener(_Store(b"shard bytes"), spec)
    for _ in range(3):
        with opener.open("s3://b/x.tar") as f:
            assert f.read() == b"shard bytes"
    stats = StageStats()
    opener.drain_into(stats)
    assert stats.counters.cache_health == CacheHealthCounts(unusable=1, bypassed_bytes=33)
    (note,) = stats.notes  # said once, the reason in it
    assert "cannot be used" in note and str(tmp_path / "file" / "cache") in note


def test_the_stores_own_failure_is_not_read_around(tmp_path):
    from loaders.storage.faults import ObjectStoreError
    from loaders.storage.layers import CacheOpener
    from loaders.storage.spec import CacheSpec, SourceSpec

    store = _Store(b"x", fail=ObjectStoreError(5, "GET s3://b/x.tar: gave up after 6 attempts"))
    opener = CacheOpener(store, SourceSpec(cache=CacheSpec(str(tmp_path / "cache"), 10**9)))
    with pytest.raises(ObjectStoreError, match="gave up"), opener.open("s3://b/x.tar"):
        pass
