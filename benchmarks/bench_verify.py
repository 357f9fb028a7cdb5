"""What checking shard-cache entries costs: the loader alone over a warm cache, with each reading
process checking every entry it opens against its checksums at fill (the default) and without.

    python benchmarks/bench_verify.py [--samples 3072] [--pairs 8]

The cache is filled once from S3 (the environment's endpoint, or a lab started for the run); every
measured epoch is then read from the cache alone. Each epoch is a new loader, so new reader
processes, each of which checks every entry it opens: the most the check can cost (with persistent
workers an entry is checked once per job). Pairs of epochs, checked and unchecked in alternating
order, as a cell runs them: decoded and augmented (2 DataLoader workers), and read without decoding
(1 worker), where a check weighs most. Figures: samples/s, the geometric mean of the per-pair ratios
and its 95 % interval. Also each hash's speed on one core of this host, which chose the scheme
(loaders/storage/entrysum.py). Goal: within 3 % of the unchecked rate.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
import uuid
import zlib
from typing import Any

from common import host_line, loaders_dataset, median, ratio_interval, write_section
from s3env import s3_endpoint
from xxhash import xxh3_64_intdigest

from iobench.cell.inputs import loader_inputs
from iobench.datasets.manifest import Manifest
from iobench.datasets.upload import upload_s3
from iobench.results.spec import LoaderSettings
from iobench.tiers.s3 import S3Tier
from loaders import LoaderConfig, ShardLoader


def _epoch(config: LoaderConfig) -> float:
    """Samples/s of one epoch of a new torch loader built from ``config``."""
    t0, n = time.perf_counter(), 0
    loader = ShardLoader(config)
    for batch in loader:
        n += len(batch)
    rate = n / (time.perf_counter() - t0)
    loader.close()
    return rate


def _hash_rates() -> dict[str, float]:
    """GB/s of each hash over 256 MiB on this host's core, the best of 3."""
    data = os.urandom(256 * 2**20)
    hashes = {
        "xxh3_64": xxh3_64_intdigest,
        "zlib.crc32": zlib.crc32,
        "sha256": lambda d: hashlib.sha256(d).digest(),
        "md5": lambda d: hashlib.md5(d).digest(),
        "blake2b": lambda d: hashlib.blake2b(d).digest(),
    }
    out = {}
    for name, fn in hashes.items():
        best = min(_timed(fn, data) for _ in range(3))
        out[name] = len(data) / best / 1e9
    return out


def _timed(fn, data: bytes) -> float:
    t0 = time.perf_counter()
    fn(data)
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--samples", type=int, default=3072)
    p.add_argument("--pairs", type=int, default=8)
    args = p.parse_args()
    if args.pairs < 2:
        p.error("--pairs: at least 2 (the interval of the ratio needs two pairs)")
    root, _ = loaders_dataset(args.samples)
    manifest = Manifest.load(root)
    with s3_endpoint() as endpoint, tempfile.TemporaryDirectory(prefix="verify-") as cache:
        url = f"s3://bench-verify-{uuid.uuid4().hex[:8]}/data"
        upload_s3(root, url, endpoint_url=endpoint)
        tier = S3Tier(url=url, endpoint_url=endpoint)
        # as a cell reads them: the manifest's sample count of each shard goes along
        urls, source = loader_inputs(tier, manifest, LoaderSettings(kind="torch", workers=2, batch_size=64))
        base: dict[str, Any] = {
            "urls": urls,
            "source": source,
            "cache_dir": cache,
            "shuffle_buffer": 0,
            "batch_size": 64,
        }
        _epoch(LoaderConfig(**base, workers=1, decode=False))  # fills the cache
        cases: dict[str, dict[str, Any]] = {
            "decoded, 2 workers": {"workers": 2},
            "not decoded, 1 worker": {"workers": 1, "decode": False},
        }
        results = {}
        for case, settings in cases.items():
            rates: dict[bool, list[float]] = {True: [], False: []}
            _epoch(LoaderConfig(**base, **settings))  # warm-up: imports, page cache
            for i in range(args.pairs):
                for verify in (True, False) if i % 2 == 0 else (False, True):
                    rates[verify].append(_epoch(LoaderConfig(**base, **settings, cache_verify=verify)))
            results[case] = rates
    hashes = _hash_rates()
    lines = [
        "## Checking shard-cache entries at first open",
        "",
        f"`python benchmarks/bench_verify.py --samples {args.samples} --pairs {args.pairs}`; "
        f"{host_line()}. {len(manifest.shards)} shards of "
        f"{manifest.total_bytes / len(manifest.shards) / 1e6:.0f} MB from a warm shard cache (filled once "
        "from the lab's radosgw); each epoch a new loader, so every entry checked again by new reader "
        "processes (the most it can cost; persistent workers check once per job). Pairs alternate the order.",
        "",
        "| loader alone | unchecked samples/s | checked samples/s | checked / unchecked (95 % CI) |",
        "|---|---|---|---|",
    ]
    for case, rates in results.items():
        ratio, low, high = ratio_interval(rates[True], rates[False])
        lines.append(
            f"| {case} | {median(rates[False]):,.0f} | {median(rates[True]):,.0f} | "
            f"{ratio:.3f} ({low:.3f}-{high:.3f}) |"
        )
    lines += [
        "",
        "Each hash on one core of this host, GB/s (256 MiB, best of 3): "
        + ", ".join(f"{name} {rate:.2f}" for name, rate in hashes.items())
        + ". The check is an XXH3-64 per 8 MiB part (loaders/storage/entrysum.py): the fill checks the "
        "download once against the upload's sha256 (or a single-part ETag's MD5), and every reading "
        "process then checks the parts it opens against their XXH3-64s.",
    ]
    write_section("verify", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
