"""Whole-object S3 reads: iobench's ObjectReader vs plain s3fs vs boto3's threaded transfer.

    python benchmarks/bench_s3_readers.py [--objects 8] [--size 32MB] [--rounds 5]

Same objects, same endpoint, same process, interleaved rounds; medians and ratios go to
docs/benchmarks.md. Uses AWS_ENDPOINT_URL and credentials from the environment, or starts a lab.
"""

from __future__ import annotations

import argparse
import io
import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import boto3
import fsspec
from boto3.s3.transfer import TransferConfig
from common import host_line, interleaved, median, spread, timed, write_section
from s3env import s3_endpoint

from iobench.host.units import format_bytes, parse_size
from iobench.tiers.s3 import s3_storage_options
from loaders.storage.objectstore import ObjectReader

OURS = "iobench ObjectReader (ranged, 4 in flight)"
S3FS_CAT = "s3fs cat_file"
BOTO3 = "boto3 download_fileobj (TransferConfig, 4 threads)"


def _stage(client, bucket: str, objects: int, size: int) -> list[str]:
    """``objects`` objects of ``size`` random bytes in a new bucket; their keys."""
    client.create_bucket(Bucket=bucket)
    payload = os.urandom(size)
    keys = [f"obj-{i:03d}" for i in range(objects)]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=payload)
    return keys


def _contenders(
    reader: ObjectReader, client, bucket: str, keys: list[str], size: int, options: dict, concurrency: int
) -> dict[str, Callable[[], float]]:
    """Each reader reading every object whole, once: bytes per second."""
    urls = [f"s3://{bucket}/{k}" for k in keys]
    total = size * len(keys)
    s3 = fsspec.filesystem("s3", skip_instance_cache=True, **options)
    transfer = TransferConfig(max_concurrency=concurrency, multipart_chunksize=8 * 2**20)

    def ours() -> float:
        return total / timed(lambda: [reader.download(u, io.BytesIO(), size) for u in urls])

    def s3fs_cat() -> float:
        return total / timed(lambda: [s3.cat_file(u) for u in urls])

    def s3fs_open_read() -> float:
        def run() -> None:
            for u in urls:
                with s3.open(u, "rb", block_size=8 * 2**20) as f:
                    f.read()

        return total / timed(run)

    def boto3_transfer() -> float:
        return total / timed(
            lambda: [client.download_fileobj(bucket, k, io.BytesIO(), Config=transfer) for k in keys]
        )

    def ours_parallel_objects() -> float:
        # how a loader with several readers uses it: objects in parallel, each ranged
        with ThreadPoolExecutor(2) as pool:
            return total / timed(
                lambda: list(pool.map(lambda u: reader.download(u, io.BytesIO(), size), urls))
            )

    return {
        OURS: ours,
        "iobench ObjectReader, 2 objects at once": ours_parallel_objects,
        S3FS_CAT: s3fs_cat,
        "s3fs open().read() (8 MiB blocks)": s3fs_open_read,
        BOTO3: boto3_transfer,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=8)
    ap.add_argument("--size", default="32MB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    size = parse_size(args.size)
    with s3_endpoint() as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        keys = _stage(client, bucket, args.objects, size)
        options = s3_storage_options(endpoint, "us-east-1", True)
        reader = ObjectReader(options, concurrency=args.concurrency)
        contenders = _contenders(reader, client, bucket, keys, size, options, args.concurrency)
        results = interleaved(contenders, rounds=args.rounds)
        reader.close()
    base = median(results[S3FS_CAT])
    boto = median(results[BOTO3])
    rows = "\n".join(
        f"| {name} | {format_bytes(median(v))}/s | {spread(v):.0f} % | {median(v) / base:.2f} | {median(v) / boto:.2f} |"
        for name, v in results.items()
    )
    write_section(
        "s3-readers",
        f"""## S3 whole-object reads (`python benchmarks/bench_s3_readers.py`)

{host_line()}. Endpoint: {"the lab's radosgw (memstore OSD, 127.0.0.1)" if "127.0.0.1" in endpoint else endpoint}.
{len(keys)} objects × {format_bytes(size)}, {args.rounds} interleaved rounds after a warm-up round; median
throughput, spread = (max − min) / median. Client, radosgw and OSD share the same 2 cores, so these
figures say how efficient each client is per CPU, not what a real cluster delivers.

| reader | median | spread | × s3fs cat_file | × boto3 transfer |
|---|---:|---:|---:|---:|
{rows}
""",
    )
    print(rows)


if __name__ == "__main__":
    main()
