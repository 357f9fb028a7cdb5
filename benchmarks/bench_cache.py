"""The local shard cache in front of S3: iobench's ShardCache vs fsspec's simplecache and filecache.

    python benchmarks/bench_cache.py [--shards 16] [--size 8MB] [--rounds 3]

Per contender and round: a cold epoch (empty cache: every shard downloaded) and a warm epoch (every
shard from the cache), then two processes reading the same shards at once into one cold cache
dir, counting the GETs that went to the server, and the cache's size against a limit half the
dataset. fsspec's caches are unbounded and not multi-process safe (fsspec/filesystem_spec#510, #639,
#1126); this measures what that costs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import uuid

import boto3
import fsspec
from common import host_line, interleaved, median, paired, spread, timed, write_section
from s3env import s3_endpoint

from iobench.host.units import format_bytes, parse_size
from iobench.tiers.s3 import s3_storage_options

KINDS = ("iobench", "simplecache", "filecache")


def _count_gets() -> dict:
    """Count GetObject calls and bytes at s3fs's request layer (benchmark harness only)."""
    import s3fs.core

    counts = {"gets": 0}
    original = s3fs.core.S3FileSystem._call_s3

    async def counting(self, method, *args, **kwargs):
        if getattr(method, "__name__", method) in ("get_object", "GetObject"):
            counts["gets"] += 1
        return await original(self, method, *args, **kwargs)

    s3fs.core.S3FileSystem._call_s3 = counting
    return counts


_READERS: dict[str, object] = {}


def _reader(options: dict):
    """One client per process, as fsspec's instance cache gives the fsspec caches: creating an S3
    client (botocore session, connection pool) costs ~0.2 s, which is not what this compares."""
    from loaders.storage.objectstore import ObjectReader

    if "s3" not in _READERS:
        _READERS["s3"] = ObjectReader(options)
    return _READERS["s3"]


def read_epoch(
    kind: str, urls: list[str], sizes: dict[str, int], cache_dir: str, limit: int, options: dict
) -> None:
    if kind == "iobench":
        from loaders.storage.shardcache import ShardCache

        reader = _reader(options)
        cache = ShardCache(cache_dir, limit)
        for u in urls:
            with cache.open_shard(
                u, lambda url, out: reader.download(url, out, sizes[url]), size=sizes[u]
            ) as f:
                while f.read(8 * 2**20):
                    pass
        return
    for u in urls:
        with fsspec.open(f"{kind}::{u}", "rb", s3=options, **{kind: {"cache_storage": cache_dir}}) as f:
            while f.read(8 * 2**20):
                pass


def _child(kind, urls, sizes, cache_dir, limit, options, env, out) -> None:
    os.environ.update(env)
    counts = _count_gets()
    read_epoch(kind, urls, sizes, cache_dir, limit, options)
    with open(out, "w") as f:
        json.dump(counts, f)


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def _stage(client, shards: int, size: int) -> list[str]:
    """``shards`` objects of ``size`` random bytes in a new bucket; their URLs."""
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    payload = os.urandom(size)
    urls = []
    for i in range(shards):
        client.put_object(Bucket=bucket, Key=f"train-{i:06d}.tar", Body=payload)
        urls.append(f"s3://{bucket}/train-{i:06d}.tar")
    return urls


def _epochs(
    kind: str, urls: list[str], sizes: dict[str, int], scratch: str, room: int, options: dict
) -> dict[str, float]:
    """A cold epoch into an empty cache, then a warm one from it: bytes per second of each."""
    total = sum(sizes.values())
    d = os.path.join(scratch, f"{kind}-{uuid.uuid4().hex[:6]}")
    cold = timed(lambda: read_epoch(kind, urls, sizes, d, room, options))
    warm = timed(lambda: read_epoch(kind, urls, sizes, d, room, options))
    shutil.rmtree(d, ignore_errors=True)
    return {"cold": total / cold, "warm": total / warm}


def _sharing_and_bound(kind: str, urls: list[str], size: int, scratch: str, room: int, options: dict) -> dict:
    """Two processes reading the same shards into one cold cache at once (the GETs they sent, and
    whether every entry came out whole), and one epoch under a limit of half the dataset (the
    cache's size after it)."""
    sizes = dict.fromkeys(urls, size)
    total = size * len(urls)
    d = os.path.join(scratch, f"shared-{kind}")
    outs = [os.path.join(scratch, f"{kind}-{i}.json") for i in range(2)]
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_child, args=(kind, urls, sizes, d, room, options, dict(os.environ), o))
        for o in outs
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    gets = sum(json.loads(open(o).read())["gets"] for o in outs)  # noqa: SIM115
    bounded_dir = os.path.join(scratch, f"bounded-{kind}")
    read_epoch(kind, urls, sizes, bounded_dir, total // 2, options)
    return {"gets": gets, "bounded_bytes": dir_bytes(bounded_dir), "shared_ok": _all_complete(d, size)}


def _table(per_round: dict[str, list[dict[str, float]]], shared: dict[str, dict]) -> str:
    """A row per cache: cold and warm epochs against simplecache's, GETs of two processes, size at limit."""

    def series(kind: str, epoch: str) -> list[float]:
        return [r[epoch] for r in per_round[kind]]

    rows = []
    for kind in KINDS:
        cold, warm = series(kind, "cold"), series(kind, "warm")
        s = shared[kind]
        rows.append(
            f"| {kind} | {format_bytes(median(cold))}/s | {spread(cold):.0f} % "
            f"| {paired(cold, series('simplecache', 'cold')):.2f} | {format_bytes(median(warm))}/s "
            f"| {paired(warm, series('simplecache', 'warm')):.2f} | {s['gets']} | {format_bytes(s['bounded_bytes'])} |"
        )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--size", default="8MB")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    size = parse_size(args.size)
    scratch = tempfile.mkdtemp(prefix="bench-cache-")
    with s3_endpoint() as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        urls = _stage(client, args.shards, size)
        sizes = dict.fromkeys(urls, size)
        options = s3_storage_options(endpoint, "us-east-1", True)
        total = size * len(urls)
        big = 4 * total  # room for everything: this part measures speed, not eviction
        per_round: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
        interleaved(
            {
                k: (lambda k=k: per_round[k].append(_epochs(k, urls, sizes, scratch, big, options)) or 0.0)
                for k in KINDS
            },
            rounds=args.rounds,
        )
        shared = {kind: _sharing_and_bound(kind, urls, size, scratch, big, options) for kind in KINDS}
    shutil.rmtree(scratch, ignore_errors=True)
    x_cold = paired([r["cold"] for r in per_round["iobench"]], [r["cold"] for r in per_round["simplecache"]])
    table = _table(per_round, shared)
    write_section(
        "shard-cache",
        f"""## Local shard cache in front of S3 (`python benchmarks/bench_cache.py`)

{host_line()}. {args.shards} shards × {format_bytes(size)} ({format_bytes(total)}) on the lab's radosgw;
{args.rounds} interleaved rounds, medians; × simplecache is the median of the per-round ratios. *Cold*:
empty cache, every shard downloaded through the
cache and read; *warm*: the same shards again, from the cache. *GETs, 2 processes*: two processes
read the same shards into one empty cache directory at once — ideal is {args.shards} (each shard once).
*Size at limit*: the cache directory after one epoch with a limit of half the dataset
({format_bytes(total // 2)}); fsspec's caches have no limit.

| cache | cold epoch | spread | × simplecache | warm epoch | × simplecache | GETs, 2 processes | size at limit |
|---|---:|---:|---:|---:|---:|---:|---:|
{table}

Goal: the cold epoch ≥ 1.0 × simplecache — {x_cold:.2f}, {"met" if x_cold >= 1.0 else "not met"} in this run.
The cache writes each GET's body into its entry as it arrives (`ObjectReader.download`), as s3fs'
`get_file` under simplecache does; it used to hold each 8 MiB range whole and copy it once more.
""",
    )
    print(table)


def _all_complete(d: str, size: int) -> bool:
    return all(
        os.path.getsize(os.path.join(r, f)) in (size,)
        for r, _, fs in os.walk(d)
        for f in fs
        if not f.startswith(".")
    )


if __name__ == "__main__":
    main()
