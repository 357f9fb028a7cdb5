"""The user's own measured read rates of the target's storage: given on the command line
(``--tier-rate KEY=RATE|FILE``), in a small YAML file (``--rates FILE``), or read straight from the
JSON a storage benchmark wrote (fio, MinIO's warp, ``rados bench``). Where given, a rate replaces the
model's assumption and the answer names it as given, with the file or flag it came from.

Two kinds of figure:

- **a tier's own rate** (what fio, warp and ``rados bench`` measure: no cache in front):
  ``nvme`` (the node's local NVMe as the dataset would use it, e.g. its RAID0), ``nvme-device``
  (one drive: the array is that times the drives), ``object`` (what one node reads from the object
  store), ``ceph`` (what one node reads from Ceph);
- **a setup's delivered rate** (a tier together with its cache, at dataset sizes; YAML
  ``delivered:``): what a whole setup gave, e.g. a proof of concept, or a published claim taken as a
  measurement. It holds only at the dataset sizes it was measured at (its cache held a different
  share of a different dataset elsewhere).

A YAML file::

    nvme: fio-md0.json          # or a rate: 24GB/s
    nvme-device: 6.5GB/s
    object: warp-get.json       # what one node reads, as one warp client measured it
    ceph: rados-bench-seq.json
    delivered:
      - setup: object+nvme      # local | object+nvme | ceph+ram
        rate: 8GB/s
        sizes: 1TB-10TB         # <1TB, >10TB, 1TB-10TB, or all
        source: our proof of concept, 2025-03
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, get_args

from iobench.host.units import parse_bandwidth, parse_size

from .calibrate import Figure

TierKey = Literal["nvme", "nvme-device", "object", "ceph"]
TIER_KEYS: tuple[str, ...] = get_args(TierKey)
SetupName = Literal["local", "object+nvme", "ceph+ram"]
SETUPS: tuple[str, ...] = get_args(SetupName)
# which benchmark measures which tier: fio reads files (NVMe, a CephFS mount), warp an S3 API
# (an object store, Ceph's RADOS Gateway), rados bench a Ceph pool
TOOL_TIERS = {"fio": TIER_KEYS, "warp": ("object", "ceph"), "rados bench": ("ceph",)}
FLAG = "--tier-rate"


@dataclass(frozen=True)
class Delivered:
    """What a setup (a tier with its cache) delivered, at dataset sizes from ``low`` to ``high``."""

    setup: str  # one of SETUPS
    rate: Figure  # bytes/s
    low_bytes: float | None = None
    high_bytes: float | None = None

    def covers(self, dataset_bytes: float) -> bool:
        return (self.low_bytes is None or dataset_bytes >= self.low_bytes) and (
            self.high_bytes is None or dataset_bytes <= self.high_bytes
        )

    def sizes(self) -> str:
        tb = lambda b: f"{b / 1e12:g} TB"  # noqa: E731
        if self.low_bytes is None and self.high_bytes is None:
            return "any size"
        if self.low_bytes is None:
            return f"< {tb(self.high_bytes)}"
        if self.high_bytes is None:
            return f"> {tb(self.low_bytes)}"
        return f"{tb(self.low_bytes)}-{tb(self.high_bytes)}"


@dataclass(frozen=True)
class MeasuredRates:
    tiers: dict[str, Figure] = field(default_factory=dict)  # by TIER_KEYS
    delivered: tuple[Delivered, ...] = ()

    def tier(self, key: str) -> Figure | None:
        return self.tiers.get(key)

    def delivered_for(self, setup: str, dataset_bytes: float) -> Delivered | None:
        """The delivered rate measured for ``setup`` at this dataset size, if any."""
        return next((d for d in self.delivered if d.setup == setup and d.covers(dataset_bytes)), None)

    def with_tiers(self, given: dict[str, Figure]) -> MeasuredRates:
        """These rates with ``given`` (the command line) over the file's."""
        return replace(self, tiers={**self.tiers, **given})


def _sizes(text: str, where: str) -> tuple[float | None, float | None]:
    s = str(text).replace(" ", "")
    try:
        if s.lower() in ("all", "any", ""):
            return None, None
        if s.startswith("<"):
            return None, float(parse_size(s[1:]))
        if s.startswith(">"):
            return float(parse_size(s[1:])), None
        low, sep, high = s.partition("-")
        if sep:
            return float(parse_size(low)), float(parse_size(high))
    except ValueError as exc:
        raise ValueError(f"{where}: sizes {text!r}: {exc}") from None
    raise ValueError(f"{where}: sizes {text!r}: write <1TB, >10TB, 1TB-10TB or all")


def _json(path: Path, where: str) -> dict:
    """The JSON object in ``path``; tools print a line or two before it (rados: ``hints = 1``)."""
    text = path.read_text()
    start = text.find("{")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:]) if start >= 0 else (None, 0)
    except ValueError as exc:
        raise ValueError(f"{where}: {path} is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: {path} holds no JSON object")
    return doc


def _fio(doc: dict, path: Path) -> tuple[float, str]:
    jobs = doc.get("jobs") or []
    bw = sum(float((j.get("read") or {}).get("bw_bytes") or 0) for j in jobs)
    if bw <= 0:
        raise ValueError(
            f"{path}: fio measured no reads; run fio with --rw=read (or randread) --output-format=json"
        )
    opts = {**(doc.get("global options") or {}), **(jobs[0].get("job options") or {})}
    devices = [d["name"] for d in doc.get("disk_util") or [] if d.get("name")]
    said = ", ".join(f"{k} {opts[k]}" for k in ("rw", "bs", "direct", "numjobs", "iodepth") if k in opts)
    where = f"; devices {', '.join(devices)}" if devices else ""
    return bw, f"fio {doc.get('fio version', '')} ({said}{where})".replace("  ", " ")


def _warp(doc: dict, path: Path) -> tuple[float, str]:
    if "by_op_type" in doc:  # warp 1.x: totals per operation type
        get = (doc.get("by_op_type") or {}).get("GET") or {}
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
        return (
            bw / clients,
            f"warp GET, {bw / 1e9:,.3g} GB/s from {clients} clients together, per client (concurrency {threads})",
        )
    return bw, f"warp GET (one client, concurrency {threads})"


def _rados(doc: dict, path: Path) -> tuple[float, str]:
    if "total_reads_made" not in doc:
        raise ValueError(
            f"{path}: a rados bench write run; read rates come from `rados bench -p POOL 60 seq --format json`"
        )
    # obj_bencher.cc: bandwidth = reads x op size / seconds / 2**20 ("MB/sec", MiB)
    bw = float(doc["bandwidth"]) * 2**20
    return bw, f"rados bench (reads of {doc.get('read_size')} B, {float(doc.get('total_time_run', 0)):.0f} s)"


def read_benchmark(path: str, key: str, where: str) -> Figure:
    """The read rate in a fio, warp or rados bench JSON file, for tier ``key``."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(
            f"{where}: {path}: no such file (give a rate such as 12GB/s, or a fio, warp or rados bench JSON file)"
        )
    doc = _json(p, where)
    if "jobs" in doc and "fio version" in doc:
        tool, (bw, said) = "fio", _fio(doc, p)
    elif "by_op_type" in doc or "operations" in doc:
        tool, (bw, said) = "warp", _warp(doc, p)
    elif "total_reads_made" in doc or "total_writes_made" in doc:
        tool, (bw, said) = "rados bench", _rados(doc, p)
    else:
        raise ValueError(f"{where}: {path} is neither fio's, warp's nor rados bench's JSON")
    if key not in TOOL_TIERS[tool]:
        raise ValueError(
            f"{where}: {path} is a {tool} measurement, which does not measure {key!r}; "
            f"{tool} gives {', '.join(TOOL_TIERS[tool])}"
        )
    return Figure(bw, f"given: {said}, {p}", origin="given")


def _is_rate(value: object) -> bool:
    """A bandwidth (``24GB/s``, a number of bytes/s) rather than a benchmark's JSON file."""
    return isinstance(value, int | float) or str(value).strip().lower().endswith("/s")


def _figure(value: object, key: str, where: str) -> Figure:
    if _is_rate(value):
        try:
            return Figure(parse_bandwidth(value), f"given: {where}", origin="given")  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return read_benchmark(str(value).strip(), key, where)


def parse_tier_rate(text: str) -> tuple[str, Figure]:
    """``nvme=24GB/s`` or ``ceph=rados-seq.json`` (``--tier-rate``)."""
    key, sep, value = text.partition("=")
    key = key.strip().lower().replace("_", "-")
    if not sep or key not in TIER_KEYS:
        raise ValueError(
            f"{FLAG} {text!r}: write KEY=RATE or KEY=FILE with KEY one of {', '.join(TIER_KEYS)} "
            "(e.g. nvme=24GB/s, ceph=rados-bench.json)"
        )
    return key, _figure(value, key, f"{FLAG} {text}")


def load_rates(path: str) -> MeasuredRates:
    """A rates YAML file (``--rates FILE``; the module docstring gives its form)."""
    import yaml

    where = f"--rates {path}"
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{where}: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected keys {', '.join(TIER_KEYS)} and delivered")
    unknown = set(doc) - {*TIER_KEYS, *(k.replace("-", "_") for k in TIER_KEYS), "delivered"}
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(TIER_KEYS)}, delivered"
        )
    base = Path(path).parent
    tiers = {}
    for raw, value in doc.items():
        if raw == "delivered":
            continue
        key = raw.replace("_", "-")
        if not _is_rate(value):  # a benchmark's JSON, relative to the YAML
            value = str(base / str(value))
        tiers[key] = _figure(value, key, f"{where}: {raw}")
    delivered = []
    for i, entry in enumerate(doc.get("delivered") or []):
        at = f"{where}: delivered[{i}]"
        if not isinstance(entry, dict) or entry.get("setup") not in SETUPS or "rate" not in entry:
            raise ValueError(f"{at}: needs setup ({', '.join(SETUPS)}), rate and sizes")
        low, high = _sizes(entry.get("sizes", "all"), at)
        rate = _figure(entry["rate"], "nvme", at)
        source = entry.get("source") or f"{at}"
        delivered.append(
            Delivered(entry["setup"], replace(rate, source=f"given: {source} ({where})"), low, high)
        )
    return MeasuredRates(tiers, tuple(delivered))
