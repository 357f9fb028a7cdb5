"""The user's own measured read rates of the target's storage: given on the command line
(``--tier-rate KEY=RATE|FILE``), in a small YAML file (``--rates FILE``), or read straight from the
JSON a storage benchmark wrote (fio, IOR, elbencho, MinIO's warp, ``rados bench``). Where given, a rate replaces the
model's assumption and the answer names it as given, with the file or flag it came from.

Two kinds of figure:

- **a tier's own rate** (what fio, warp and ``rados bench`` measure: no cache in front):
  ``nvme`` (the node's local NVMe as the dataset would use it, e.g. its RAID0), ``nvme-device``
  (one drive: the array is that times the drives), ``object`` (what one node reads from the object
  store), ``ceph`` (what one node reads from Ceph), ``pfs`` (what one node reads from a shared or
  parallel file system: Lustre, Storage Scale, WEKA, VAST, NFS);
- **a setup's delivered rate** (a tier together with its cache, at dataset sizes; YAML
  ``delivered:``): what a whole setup gave, e.g. a proof of concept, or a published claim taken as a
  measurement. It holds only at the dataset sizes it was measured at (its cache held a different
  share of a different dataset elsewhere).

A rate is refused before it is used where it cannot be what it is given as: a fio run on a device
that is not NVMe (a virtual machine's virtio disk, a SATA drive) given as the NVMe array's, and a
buffered read (no ``--direct=1``) of less data than the node's RAM, which the page cache served.

A YAML file::

    nvme: fio-md0.json          # or a rate: 24GB/s
    nvme-device: 6.5GB/s
    object: warp-get.json       # what one node reads, as one warp client measured it
    ceph: rados-bench-seq.json
    pfs: ior-read.json          # fio, IOR or elbencho on the mount
    delivered:
      - setup: object+nvme      # local | object+nvme | ceph+ram
        rate: 8GB/s
        sizes: 1TB-10TB         # <1TB, >10TB, 1TB-10TB, or all
        source: our proof of concept, 2025-03
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypeGuard, get_args

from iobench.host.units import parse_bandwidth, parse_size

from .benchfiles import BenchReading, read_file
from .calibrate import Figure
from .units import Units

TierKey = Literal["nvme", "nvme-device", "object", "ceph", "pfs"]
TIER_KEYS: tuple[str, ...] = get_args(TierKey)
SetupName = Literal["local", "sharded", "pfs", "object+nvme", "ceph+nvme", "ceph+ram"]
SETUPS: tuple[SetupName, ...] = get_args(SetupName)
# every setup recommend weighs (storages.py): those above, or a throttled tier a sweep measured
Setup = Literal[SetupName, "what-if"]
# which benchmark measures which tier: fio reads files and devices (NVMe, a CephFS or parallel file
# system mount), IOR and elbencho a file system, warp an S3 API (an object store, Ceph's RADOS
# Gateway), rados bench a Ceph pool
TOOL_TIERS = {
    "fio": TIER_KEYS,
    "IOR": ("pfs", "ceph", "nvme"),
    "elbencho": ("pfs", "ceph", "nvme"),
    "warp": ("object", "ceph"),
    "rados bench": ("ceph",),
}
# a device fio names that is NVMe: a drive, a namespace, or an md array (of NVMe, the user's word)
_NVME_DEVICE = re.compile(r"^(nvme\d|md\d|md/)")
FLAG = "--tier-rate"


@dataclass(frozen=True)
class Delivered:
    """What a setup (a tier with its cache) delivered, at dataset sizes from ``low`` to ``high``."""

    setup: SetupName
    rate: Figure  # bytes/s
    low_bytes: float | None = None
    high_bytes: float | None = None

    def covers(self, dataset_bytes: float) -> bool:
        return (self.low_bytes is None or dataset_bytes >= self.low_bytes) and (
            self.high_bytes is None or dataset_bytes <= self.high_bytes
        )

    def sizes(self, units: Units | None = None) -> str:
        tb = (units or Units()).size
        if self.low_bytes is None:
            return "any size" if self.high_bytes is None else f"< {tb(self.high_bytes)}"
        if self.high_bytes is None:
            return f"> {tb(self.low_bytes)}"
        return f"{tb(self.low_bytes)}-{tb(self.high_bytes)}"


@dataclass(frozen=True)
class MeasuredRates:
    tiers: dict[str, Figure] = field(default_factory=dict)  # by TIER_KEYS
    delivered: tuple[Delivered, ...] = ()

    def tier(self, key: str) -> Figure | None:
        return self.tiers.get(key)

    def delivered_for(self, setup: Setup, dataset_bytes: float) -> Delivered | None:
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


def vet(reading: BenchReading, key: str, where: str, ram_bytes: float | None) -> str:
    """Refuse a benchmark's rate that cannot be ``key``'s: a device that is not NVMe given as the
    NVMe array's, a buffered read of no more than the node's RAM (the page cache served it). Return
    a caveat where the file cannot tell ('' when it can)."""
    if (
        key in ("nvme", "nvme-device")
        and reading.devices
        and not any(_NVME_DEVICE.match(d) for d in reading.devices)
    ):
        raise ValueError(
            f"{where}: {reading.tool} read {', '.join(reading.devices)}, which is not an NVMe drive or an md "
            f"array: a rate measured on another kind of device is not the NVMe array's. Run fio on the NVMe "
            "(or its md array) with --direct=1; if it is NVMe behind a hypervisor, give its rate as a number"
        )
    if reading.direct is not False:
        return ""
    if reading.footprint_bytes is None:
        return (
            f"a buffered {reading.tool} read of unknown size: the page cache may have served part of it "
            "(run it with direct I/O)"
        )
    if ram_bytes is not None and reading.footprint_bytes <= ram_bytes:
        raise ValueError(
            f"{where}: a buffered {reading.tool} read of {reading.footprint_bytes / 1e9:,.3g} GB, no more than the "
            f"node's RAM ({ram_bytes / 1e9:,.3g} GB): the page cache served it, not the storage. Run it with direct "
            "I/O (fio --direct=1, IOR -B, elbencho --direct) or on more data than the RAM"
        )
    return ""


def read_benchmark(path: str, key: str, where: str, ram_bytes: float | None = None) -> Figure:
    """The read rate in a fio, IOR, elbencho, warp or rados bench JSON file, for tier ``key``,
    refused where it cannot be that tier's (:func:`vet`; ``ram_bytes``: the node's RAM)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(
            f"{where}: {path}: no such file (give a rate such as 12GB/s, or a fio, IOR, elbencho, warp or "
            "rados bench JSON file)"
        )
    reading = read_file(p, where)
    if key not in TOOL_TIERS[reading.tool]:
        raise ValueError(
            f"{where}: {path} is {'an' if reading.tool[0] in 'aeiouIE' else 'a'} {reading.tool} measurement, "
            f"which does not measure {key!r}; "
            f"{reading.tool} gives {', '.join(TOOL_TIERS[reading.tool])}"
        )
    caveat = vet(reading, key, where, ram_bytes)
    return Figure(reading.bytes_per_s, f"given: {reading.said}, {p}", origin="given", caveat=caveat)


def _is_rate(value: object) -> TypeGuard[str | int | float]:
    """A bandwidth (``24GB/s``, a number of bytes/s) rather than a benchmark's JSON file."""
    return isinstance(value, int | float) or (isinstance(value, str) and value.strip().lower().endswith("/s"))


def _figure(value: object, key: str, where: str, ram_bytes: float | None = None) -> Figure:
    if _is_rate(value):
        try:
            return Figure(parse_bandwidth(value), f"given: {where}", origin="given")
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return read_benchmark(str(value).strip(), key, where, ram_bytes)


def parse_tier_rate(text: str, ram_bytes: float | None = None) -> tuple[str, Figure]:
    """``nvme=24GB/s`` or ``ceph=rados-seq.json`` (``--tier-rate``); ``ram_bytes``: the node's RAM,
    against which a buffered benchmark read is judged."""
    key, sep, value = text.partition("=")
    key = key.strip().lower().replace("_", "-")
    if not sep or key not in TIER_KEYS:
        raise ValueError(
            f"{FLAG} {text!r}: write KEY=RATE or KEY=FILE with KEY one of {', '.join(TIER_KEYS)} "
            "(e.g. nvme=24GB/s, ceph=rados-bench.json, pfs=ior.json)"
        )
    return key, _figure(value, key, f"{FLAG} {text}", ram_bytes)


def load_rates(path: str, ram_bytes: float | None = None) -> MeasuredRates:
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
        tiers[key] = _figure(value, key, f"{where}: {raw}", ram_bytes)
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
