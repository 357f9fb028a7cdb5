"""The read rate in a storage benchmark's JSON, as each tool writes it, with what the run was:
fio (devices, direct or buffered, how much it read), IOR and elbencho (a file system, one node or
several), MinIO's warp (an S3 API) and ``rados bench`` (a Ceph pool).

What a file says it measured is kept beside the rate, so a rate can be refused before it is used
where it cannot be what it is given as (rates.vet)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 2**20
_FIO_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class BenchReading:
    tool: str  # fio | IOR | elbencho | warp | rados bench
    bytes_per_s: float  # what one node (one client) read
    said: str
    devices: tuple[str, ...] = ()  # the block devices fio saw (disk_util), where it names them
    direct: bool | None = None  # None: the tool reads through no page cache (an object store)
    footprint_bytes: float | None = None  # the data a buffered run read, where the file says


def _documents(text: str) -> list[dict]:
    """Every JSON object in ``text``: tools print a line or two before one (rados: ``hints = 1``),
    elbencho writes a list of them, or one per phase."""
    decoder, i = json.JSONDecoder(), 0
    docs: list[dict] = []
    while (start := min((p for p in (text.find("{", i), text.find("[", i)) if p >= 0), default=-1)) >= 0:
        try:
            doc, end = decoder.raw_decode(text[start:])
        except ValueError:
            i = start + 1
            continue
        docs.extend(d for d in (doc if isinstance(doc, list) else [doc]) if isinstance(d, dict))
        i = start + end
    return docs


def _fio_size(text: object) -> float | None:
    """A fio size ("64M", "1g", "4096"): fio's prefixes are binary unless kb_base says otherwise."""
    m = _FIO_SIZE.match(str(text or ""))
    if not m:
        return None
    return float(m.group(1)) * 1024 ** " kmgtp".index((m.group(2) or " ").lower())


def _fio(doc: dict, path: Path) -> BenchReading:
    jobs = doc.get("jobs") or []
    bw = sum(float((j.get("read") or {}).get("bw_bytes") or 0) for j in jobs)
    if bw <= 0:
        raise ValueError(
            f"{path}: fio measured no reads; run fio with --rw=read (or randread) --output-format=json"
        )
    opts = {**(doc.get("global options") or {}), **(jobs[0].get("job options") or {})}
    devices = tuple(d["name"] for d in doc.get("disk_util") or [] if d.get("name"))
    said = ", ".join(
        f"{k} {opts[k]}" for k in ("rw", "bs", "direct", "numjobs", "iodepth", "size") if k in opts
    )
    where = f"; devices {', '.join(devices)}" if devices else ""
    size = _fio_size(opts.get("size"))
    jobs_reading = 1 if opts.get("filename") else int(opts.get("numjobs") or 1)
    return BenchReading(
        "fio",
        bw,
        f"fio {doc.get('fio version', '')} ({said}{where})".replace("  ", " "),
        devices,
        str(opts.get("direct", "0")) == "1",
        size * jobs_reading if size else None,
    )


def _ior(doc: dict, path: Path) -> BenchReading:
    read = next((r for r in doc.get("summary") or [] if r.get("operation") == "read"), None)
    if not read or not read.get("bwMeanMIB"):
        raise ValueError(f"{path}: IOR measured no reads; run ior with -r (and -O summaryFormat=JSON)")
    options = ((doc.get("tests") or [{}])[0].get("Options") or {}) if doc.get("tests") else {}
    nodes = int(options.get("nodes") or 1)
    command = str(doc.get("Command line") or "")
    direct = bool(re.search(r"(^|\s)(-B|--posix\.odirect)(\s|$)", command))
    footprint = _human(options.get("aggregate filesize"))
    bw = float(read["bwMeanMIB"]) * MIB
    per = f", {bw / 1e9:,.3g} GB/s from {nodes} nodes together, per node" if nodes > 1 else ""
    return BenchReading(
        "IOR",
        bw / nodes,
        f"IOR {read.get('API', '')} read, mean of {read.get('repetitions', 1)} repetition(s), "
        f"{read.get('numTasks', '?')} task(s){per}",
        (),
        direct,
        footprint,
    )


def _human(text: object) -> float | None:
    """IOR's HumanReadable sizes: "16.00 GiB", "512.00 MiB"."""
    m = re.match(r"^\s*([\d.]+)\s*([KMGTP]i?B|bytes)\s*$", str(text or ""))
    if not m:
        return None
    return float(m.group(1)) * (1 if m.group(2) == "bytes" else 1024 ** "KMGTP".index(m.group(2)[0]) * 1024)


def _elbencho(docs: list[dict], path: Path) -> BenchReading:
    read = next((d for d in docs if str(d.get("operation", "")).upper() == "READ"), None)
    if read is None or not read.get("MiB/s [last]"):
        raise ValueError(f"{path}: elbencho measured no reads; run elbencho with -r and --jsonfile")
    command = str(read.get("command") or "")
    mib = float(read.get("MiB [last]") or 0) * MIB
    hosts = "--hosts" in command
    return BenchReading(
        "elbencho",
        float(read["MiB/s [last]"]) * MIB,
        f"elbencho {read.get('version', '')} READ, {read.get('threads', '?')} thread(s)"
        + (" on several hosts (--hosts): their total, not one node's" if hosts else ""),
        (),
        "--direct" in command,
        mib or None,
    )


def _warp(doc: dict, path: Path) -> BenchReading:
    if "by_op_type" in doc:  # warp 1.x: totals per operation type
        get: dict[str, Any] = (doc.get("by_op_type") or {}).get("GET") or {}
        tp = get.get("throughput") or {}
        ms, total = tp.get("measure_duration_millis") or 0, tp.get("bytes") or 0
        bw = 1000.0 * total / ms if ms else 0.0
        clients, threads = len(get.get("clients") or []) or 1, get.get("concurrency")
    else:  # warp 0.x: a list of operations with their average
        get = next((o for o in doc.get("operations") or [] if o.get("type") == "GET"), {})
        bw = float((get.get("throughput") or {}).get("average_bps") or 0)
        clients, threads = 1, get.get("concurrency")
    if bw <= 0:
        raise ValueError(f"{path}: warp measured no GETs; run `warp get ... --json` (reads are GETs)")
    if clients > 1:  # distributed warp: the clients' total; a node reads its share
        return BenchReading(
            "warp",
            bw / clients,
            f"warp GET, {bw / 1e9:,.3g} GB/s from {clients} clients together, per client (concurrency {threads})",
        )
    return BenchReading("warp", bw, f"warp GET (one client, concurrency {threads})")


def _rados(doc: dict, path: Path) -> BenchReading:
    if "total_reads_made" not in doc:
        raise ValueError(
            f"{path}: a rados bench write run; read rates come from `rados bench -p POOL 60 seq --format json`"
        )
    # obj_bencher.cc: bandwidth = reads x op size / seconds / 2**20 ("MB/sec", MiB)
    bw = float(doc["bandwidth"]) * MIB
    return BenchReading(
        "rados bench",
        bw,
        f"rados bench (reads of {doc.get('read_size')} B, {float(doc.get('total_time_run', 0)):.0f} s)",
    )


def read_file(path: Path, where: str) -> BenchReading:
    """The reading in a fio, IOR, elbencho, warp or rados bench JSON file."""
    try:
        docs = _documents(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where}: {path}: {exc}") from None
    doc = docs[0] if docs else {}
    if "jobs" in doc and "fio version" in doc:
        return _fio(doc, path)
    if "summary" in doc and ("tests" in doc or "Command line" in doc):
        return _ior(doc, path)
    if any("MiB/s [last]" in d for d in docs):
        return _elbencho(docs, path)
    if "by_op_type" in doc or "operations" in doc:
        return _warp(doc, path)
    if "total_reads_made" in doc or "total_writes_made" in doc:
        return _rados(doc, path)
    raise ValueError(f"{where}: {path} is not the JSON of fio, IOR, elbencho, warp or rados bench")
