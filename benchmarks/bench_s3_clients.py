"""Object clients side by side against the lab's radosgw: s3fs, the MinIO SDK, s3torchconnector,
obstore and s3dlio, each through iobench's reader (its retries, deadline and counters), as the
loaders read with it.

    python benchmarks/bench_s3_clients.py [--rounds 5] [--objects 600] [--quick]
    python benchmarks/bench_s3_clients.py --sweep [--samples 1024] [--workers 2]

The first: GET ops/s of 100 KB objects (what a loader reading one object per sample asks of the
store) and MiB/s of 8 MiB and 64 MiB ranged GETs (a shard's parts), at 1, 16 and 64 requests in
flight (64 MiB: 1 and 16, so no more than 1 GiB is in flight); CPU seconds of the process per GiB
read; p99 request latency. Every client in every round, in a rotating order, after a warm-up
round; medians of the rounds and ratios to the best, to docs/benchmarks.md (section s3-clients).

The second (--sweep): `iobench sweep` with the torch loader, one tier per client over the same
objects (one object per sample), decoded and not: samples/s, bytes read, requests, the client's CPU
per request and the verdict per client (section s3-clients-sweep).

Uses AWS_ENDPOINT_URL and credentials from the environment, or starts a lab.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import boto3
import numpy as np
from common import cpu_seconds, host_line, median, paired, spread, write_section
from s3env import s3_endpoint

from iobench.tiers.s3 import s3_storage_options
from loaders.observe import RequestCounts
from loaders.storage import CLIENT_NAMES, installed_clients
from loaders.storage.clients import make_client
from loaders.storage.clients.base import ClientSettings
from loaders.storage.objectstore import ObjectReader

SMALL = 100_000  # bytes: an ImageNet-like JPEG
BIG_OBJECT = 128 * 2**20
RANGES = (8 * 2**20, 64 * 2**20)
IN_FLIGHT_LIMIT = 2**30  # bytes of ranges in flight at once, at most
DEADLINE_S = 30.0  # the tiers' default


@dataclass(frozen=True)
class Case:
    size: int  # bytes per GET
    concurrency: int

    @property
    def label(self) -> str:
        return f"{'100 KB' if self.size == SMALL else f'{self.size >> 20} MiB'} x{self.concurrency}"


RAW_CASE = Case(SMALL, 16)  # where the reader's own cost per request shows most


@dataclass(frozen=True)
class Figures:
    rate: float  # GETs/s of small objects; bytes/s of ranges
    cpu_per_gib: float  # process CPU seconds per GiB read
    p99_ms: float
    counted_share: float  # the reader's client_cpu_s over the process's CPU


def measure(
    reader: ObjectReader, jobs: list[tuple[str, int, int]], concurrency: int, small: bool, alone=None
) -> Figures:
    """``jobs`` (url, start, end) read by ``concurrency`` threads, each taking the next job: small
    objects as the objects layout reads them (read_range: bytes), ranges as a shard's stream does
    (read_view: the client's buffer); ``alone``: the same client's own call instead, without the
    reader's retries, deadline and counters (what the reader costs)."""
    read = alone.get if alone is not None else reader.read_range if small else reader.read_view
    todo = iter(jobs)
    lock = threading.Lock()
    done = [0] * concurrency

    def worker(i: int) -> None:
        while True:
            with lock:
                job = next(todo, None)
            if job is None:
                return
            done[i] += len(read(*job))

    reader.take_stats()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    stats = reader.take_stats()
    nbytes = sum(done)
    assert nbytes == sum(end - start for _, start, end in jobs) and stats.counts.failures == 0
    return Figures(
        rate=(len(jobs) if small else nbytes) / wall,
        cpu_per_gib=cpu / (nbytes / 2**30),
        p99_ms=float(np.percentile(stats.latencies_ms, 99)) if stats.latencies_ms else float("nan"),
        counted_share=stats.counts.client_cpu_s / cpu if cpu else 0.0,
    )


def stage(client, bucket: str, objects: int) -> tuple[list[str], list[str]]:
    """``objects`` small objects and four big ones; their URLs."""
    client.create_bucket(Bucket=bucket)
    small = os.urandom(SMALL)
    keys = [f"small/{i:05d}.jpg" for i in range(objects)]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=small)
    big = [f"big/{i}.bin" for i in range(4)]
    for key in big:
        client.put_object(Bucket=bucket, Key=key, Body=os.urandom(BIG_OBJECT))
    return [f"s3://{bucket}/{k}" for k in keys], [f"s3://{bucket}/{k}" for k in big]


def remove(client, bucket: str, urls: list[str]) -> None:
    """The benchmark's objects and bucket: a memstore lab holds them in RAM."""
    keys = [u.split("/", 3)[3] for u in urls]
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]]})
    client.delete_bucket(Bucket=bucket)


def range_jobs(urls: list[str], size: int, concurrency: int, total: int) -> list[tuple[str, int, int]]:
    count = max(3 * concurrency, total // size)
    per_object = BIG_OBJECT // size
    return [
        (urls[k % len(urls)], (k // len(urls) % per_object) * size, (k // len(urls) % per_object + 1) * size)
        for k in range(count)
    ]


def cell(values: list[float], best: float) -> str:
    """The median and, in brackets, its ratio to the best client's."""
    m = median(values)
    return f"{m:,.0f} ({m / best:.2f})"


def microbenchmark(args: argparse.Namespace) -> None:
    clients = [c for c in CLIENT_NAMES if c in installed_clients()]
    cases = [Case(SMALL, c) for c in (1, 16, 64)] + [
        Case(size, c) for size in RANGES for c in (1, 16, 64) if size * c <= IN_FLIGHT_LIMIT
    ]
    if args.quick:
        cases = [Case(SMALL, 16), Case(RANGES[0], 16)]
    with s3_endpoint() as endpoint:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        bucket = f"clients-{uuid.uuid4().hex[:8]}"
        small_urls, big_urls = stage(s3, bucket, args.objects)
        options = s3_storage_options(endpoint, "us-east-1", True, deadline_s=DEADLINE_S)
        readers = {
            c: ObjectReader(options, client=c, part_bytes=RANGES[-1], concurrency=64, deadline_s=DEADLINE_S)
            for c in clients
        }
        settings = ClientSettings.from_storage_options(options, part_bytes=RANGES[-1], connections=64)
        bare = {c: make_client(c, settings) for c in clients}
        jobs = {
            case: [(u, 0, SMALL) for u in small_urls]
            if case.size == SMALL
            else range_jobs(big_urls, case.size, case.concurrency, args.range_bytes)
            for case in cases
        }
        results: dict[tuple[str, Case], list[Figures]] = {(c, case): [] for c in clients for case in cases}
        raw: dict[str, list[Figures]] = {c: [] for c in clients}  # 100 KB x16, without the reader
        load = [os.getloadavg()[0]]
        for r in range(1 + args.rounds):  # round 0 warms every client's connections up
            for case in cases:
                for i in range(len(clients)):
                    client = clients[(r + i) % len(clients)]
                    figures = measure(readers[client], jobs[case], case.concurrency, case.size == SMALL)
                    if r:
                        results[client, case].append(figures)
                    if case == RAW_CASE:
                        figures = measure(readers[client], jobs[case], 16, True, alone=bare[client])
                        if r:
                            raw[client].append(figures)
            load.append(os.getloadavg()[0])
            print(f"round {r} done, load {load[-1]:.1f}", flush=True)
        for reader in readers.values():
            reader.close()
        for bare_client in bare.values():
            bare_client.close()
        remove(s3, bucket, small_urls + big_urls)
    write_table(args, clients, cases, results, raw, endpoint, load)


def _rates(results: dict[tuple[str, Case], list[Figures]], client: str, case: Case) -> list[float]:
    return [f.rate for f in results[client, case]]


def _rate_row(
    results: dict[tuple[str, Case], list[Figures]],
    best: dict[Case, float],
    client: str,
    group: list[Case],
    cpu_case: Case,
) -> str:
    """A client's rates in ``group`` (each with its ratio to the column's best), and its CPU, p99
    and counted share in ``cpu_case``."""
    unit = 1 if cpu_case.size == SMALL else 2**20  # GETs/s; MiB/s
    rate_cells = [
        cell([v / unit for v in _rates(results, client, case)], best[case] / unit) for case in group
    ]
    figs = results[client, cpu_case]
    return (
        f"| {client} | "
        + " | ".join(rate_cells)
        + f" | {median([f.cpu_per_gib for f in figs]):.1f} | {median([f.p99_ms for f in figs]):.1f}"
        + f" | {100 * median([f.counted_share for f in figs]):.0f} % |"
    )


def _order(
    results: dict[tuple[str, Case], list[Figures]],
    clients: list[str],
    cases: list[Case],
    best: dict[Case, float],
) -> str:
    """The clients, best first, by the geometric mean of their ratios to the best over every case."""
    overall = {
        c: math.exp(
            statistics.fmean(math.log(median(_rates(results, c, case)) / best[case]) for case in cases)
        )
        for c in clients
    }
    return ", ".join(f"{c} {overall[c]:.2f}" for c in sorted(clients, key=lambda c: overall[c], reverse=True))


def _reader_cost_rows(
    results: dict[tuple[str, Case], list[Figures]], raw: dict[str, list[Figures]], clients: list[str]
) -> str:
    """Each client's own call alone against the same call through the reader, same rounds."""
    return "\n".join(
        f"| {c} | {median([f.rate for f in raw[c]]):,.0f} | {median(_rates(results, c, RAW_CASE)):,.0f} "
        f"| {paired(_rates(results, c, RAW_CASE), [f.rate for f in raw[c]]):.2f} "
        f"| {median([f.cpu_per_gib for f in raw[c]]):.1f} | {median([f.cpu_per_gib for f in results[c, RAW_CASE]]):.1f} |"
        for c in clients
    )


def write_table(args, clients, cases, results, raw, endpoint, load) -> None:
    best = {case: max(median(_rates(results, c, case)) for c in clients) for case in cases}
    small = [case for case in cases if case.size == SMALL]
    ranged = [case for case in cases if case.size != SMALL]
    # CPU, p99 and counted share are given at 16 in flight
    small_cpu = next(c for c in small if c.concurrency == 16)
    ranged_cpu = next(c for c in ranged if c.concurrency == 16)
    spreads = [spread(_rates(results, c, case)) for c in clients for case in cases]
    order = _order(results, clients, cases, best)
    raw_rows = _reader_cost_rows(results, raw, clients)
    head_small = " | ".join(f"x{c.concurrency}" for c in small)
    head_ranged = " | ".join(c.label for c in ranged)
    small_rows = "\n".join(_rate_row(results, best, c, small, small_cpu) for c in clients)
    ranged_rows = "\n".join(_rate_row(results, best, c, ranged, ranged_cpu) for c in clients)
    where = "the lab's radosgw (memstore OSD, 127.0.0.1)" if "127.0.0.1" in endpoint else endpoint
    command = "python benchmarks/bench_s3_clients.py" + (
        f" --rounds {args.rounds}" if args.rounds != 5 else ""
    )
    body = f"""## Object clients side by side (`{command}`)

{host_line()}; load average over the rounds {min(load):.1f}–{max(load):.1f}. Endpoint: {where}.
Every client reads through iobench's reader (`loaders.storage.ObjectReader(client=...)`: its own
retries off, the reader's retries, a {DEADLINE_S:g} s deadline and its counters), one reader per
client in one process, {args.rounds} interleaved rounds after a warm-up round (each round runs every
client on every case, in a rotating order); medians of the rounds, and in brackets the ratio to the
best client of the column. *CPU s/GiB*: CPU seconds of the whole process (every thread, the client's
own event loops and runtimes included) per GiB read, at 16 in flight; *p99*: the 99th percentile of
the request latency at 16 in flight; *counted*: the share of that CPU the reader's `client_cpu_s`
counter saw (the calling threads during requests plus the client's own I/O threads), which the
loaders report per cell. radosgw, the OSD and the client share the same 2 cores, so these figures
rank the clients' cost per request and per byte, not what a real cluster serves. Largest spread of
a cell, (max − min) / median: {max(spreads):.0f} %.

**Order** (the geometric mean of each client's ratios to the best over the {len(cases)} cases below,
which `client: auto` follows, among the clients that survive a fork): {order}.

GET ops/s of {SMALL // 1000} KB objects ({args.objects} objects per measurement, read whole as one
object per sample is), by requests in flight:

| client | {head_small} | CPU s/GiB | p99 ms | counted |
|---|{"---:|" * (len(small) + 3)}
{small_rows}

What the reader itself costs (100 KB objects, 16 in flight): the client's own call alone against
the same call through the reader (its retries, deadline, latency sample and counters; for
s3torchconnector also its helper thread per attempt), same rounds:

| client | client alone GETs/s | through the reader | ratio (paired) | CPU s/GiB alone | through the reader |
|---|---:|---:|---:|---:|---:|
{raw_rows}

MiB/s of ranged GETs (a shard's parts; size x requests in flight):

| client | {head_ranged} | CPU s/GiB | p99 ms | counted |
|---|{"---:|" * (len(ranged) + 3)}
{ranged_rows}
"""
    print(body)
    if not args.quick:
        write_section("s3-clients", body)


def sweep(args: argparse.Namespace) -> None:
    """One tier per client over the same objects; the torch loader; `iobench sweep`."""
    import yaml

    from iobench.results.api import load_summaries

    clients = [c for c in CLIENT_NAMES if c in installed_clients()]
    tag = uuid.uuid4().hex[:6]
    work = Path(tempfile.mkdtemp(prefix="clients-sweep-"))
    out = Path(args.out or work / "run")
    with s3_endpoint() as endpoint:
        url = f"s3://clients-{tag}/ds"
        cfg = {
            "dataset": {"synth": {"samples": args.samples, "seed": 0, "shard_size": "16MB"}},
            # a client list: one tier (and cell) per client, named rgw-<client>
            "tiers": [{"kind": "s3", "name": "rgw", "url": url, "client": clients, "upload": True}],
            "loaders": [
                {
                    "kind": "torch",
                    "workers": [args.workers],
                    "batch_size": [64],
                    "layout": "objects",
                    "decode": [True, False],
                }
            ],
            "accelerators": [{"kind": "emulated", "type": "h100", "model": "resnet50", "demand": "training"}],
            "run": {"cache": ["cold"], "epochs": args.epochs, "warmup_steps": 3},
        }
        (work / "sweep.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        proc = subprocess.run(
            [sys.executable, "-m", "iobench.cli", "sweep", str(work / "sweep.yaml"), "--out", str(out)]
        )
    lines, said = [], []
    for s in load_summaries(out):
        if not s.ok:
            lines.append(f"| {s.cell.tier_name} | {s.cell.loader.decode} | failed: {s.error} ||||||||")
            continue
        assert s.metrics is not None and s.verdict is not None  # a cell that did not fail has both
        c = s.loader_stats_all_steps.counters.requests or RequestCounts()
        requests = c.requests
        epochs = len(s.epochs)  # a cell reads whole epochs until it has measured long enough
        lines.append(
            f"| {s.cell.tier_name.removeprefix('rgw-')} | {'yes' if s.cell.loader.decode else 'no'} "
            f"| {s.metrics.samples_per_s:,.0f} | {epochs} | {c.bytes_transferred / 1e6 / epochs:,.1f} "
            f"| {requests:,} | {1000 * c.client_cpu_s / max(1, requests):.2f} | {c.retries} "
            f"| {s.verdict.bound}{' (' + s.verdict.binding_stage + ')' if s.verdict.binding_stage else ''} |"
        )
        client = [e for e in s.verdict.evidence if e.startswith("client")]
        said.append(f"- `{s.cell.cell_id}`: {s.verdict.headline}" + "".join(f"; {e}" for e in client))
    table = "\n".join(lines)
    verdicts = "\n".join(said)
    body = f"""## Object clients under the torch loader (`python benchmarks/bench_s3_clients.py --sweep`)

{host_line()}. `iobench sweep` against the lab's radosgw ({endpoint}): {args.samples} ImageNet-like
samples read one object per sample (`layout: objects`), the torch loader with {args.workers} workers,
batch 64, an emulated H100 (ResNet-50, training demand), {args.epochs} epochs per cell, cold; one tier per
client over the same objects (one tier with `client: [{", ".join(clients)}]`), each cell decoded and not. A cell reads whole epochs
until it has measured long enough, so a faster client reads more of them: *MB per epoch* is the
bytes the loader read from the store over the cell's epochs, per epoch (the same for every client:
the dataset); *client CPU ms/request*: the reader's `client_cpu_s` over its requests.

| client | decode | samples/s | epochs | MB per epoch | requests | client CPU ms/request | retries | verdict |
|---|---|---:|---:|---:|---:|---:|---:|---|
{table}

Each cell's verdict as the report gives it, with its evidence on the client:

{verdicts}
"""
    print(body)
    write_section("s3-clients-sweep", body)
    sys.exit(proc.returncode)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--objects", type=int, default=600)
    ap.add_argument("--range-bytes", type=int, default=512 * 2**20, help="bytes of ranges per measurement")
    ap.add_argument("--quick", action="store_true", help="two cases, for development; nothing written")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    sweep(args) if args.sweep else microbenchmark(args)


if __name__ == "__main__":
    main()
