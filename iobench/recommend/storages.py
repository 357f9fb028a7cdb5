"""Where the dataset can live: each setup a buyer weighs, as a backend (the raw tier) and the cache
in front of it, for one node of the cluster.

- **local NVMe**: a copy of the dataset on every node's NVMe array (RAID0), the page cache in front;
- **local NVMe, sharded**: each of the N nodes holds 1/N of it and reads the rest from its peers
  over the storage network;
- **parallel file system** (Lustre, Storage Scale, WEKA, VAST, NFS): what one node reads from the
  mount, the page cache in front;
- **an object backend behind an NVMe shard cache**: an S3 store (MinIO, AWS) and, where Ceph's rate
  is known, Ceph's RADOS Gateway (the same S3 API);
- **Ceph + RAM cache** (RADOS, CephFS);
- every throttled "what-if" tier a sweep measured.

Each backend's rate comes from, first found first: the user's measured rates (``--tier-rate``,
``--rates``), a sweep's cells on that kind of storage (``--results``), a datasheet (the NVMe drives
by PCIe generation). A shared store has no datasheet: without a rate its options are conditional.
A remote rate is capped by the node's storage network.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import get_args

from loaders.storage import choose_policy

from .calibrate import Calibration, Figure
from .mixrule import RULES as RULE_WORDS
from .rates import Setup
from .scenario import Scenario
from .staging import Staging, staging

# when two options are otherwise equal: the one with less hardware first (the node alone; the nodes
# and their network; a storage system beside them), then this order
SETUP_ORDER: tuple[Setup, ...] = get_args(Setup)
HARDWARE = {"local": 0, "sharded": 1, "pfs": 2, "object+nvme": 2, "ceph+nvme": 2, "ceph+ram": 2, "what-if": 2}
# the --tier-rate key of each setup's backend, and the tier kinds a sweep's cells measure it with
RATE_KEYS = {
    "local": "nvme",
    "sharded": "nvme",
    "pfs": "pfs",
    "object+nvme": "object",
    "ceph+nvme": "ceph",
    "ceph+ram": "ceph",
}
BACKEND_KINDS = {
    "nvme": ("local",),
    "object": ("s3",),
    "ceph": ("rados", "cephfs"),
    "pfs": ("local", "cephfs"),
}
BACKEND_NAMES = {
    "nvme": "the NVMe array",
    "object": "the object store",
    "ceph": "Ceph",
    "pfs": "the parallel file system",
}
BENCHMARKS = {"nvme": "fio", "object": "warp", "ceph": "rados bench or warp", "pfs": "fio, IOR or elbencho"}
RAM_PER_READER = Figure(
    2.3e9,
    "a single-threaded buffered read from the page cache, 2.3 GB/s on one core of a 2-core cloud VM "
    "(docs/recommend.md 'Reference figures')",
    origin="reference",
)


@dataclass(frozen=True)
class Storage:
    name: str
    setup: Setup
    kinds: tuple[str, ...]  # tier kinds whose cost of fetching (CPU per sample) applies
    backend: Figure | None  # what one node reads from the backend; None: not known (conditional)
    cache: Figure | None  # read rate of the cache, None without one
    cache_bytes: float  # what the cache can hold (a RAM cache: at most; the RAM left decides)
    cache_in_ram: bool
    capacity_short: str = ""  # why the dataset does not fit ('' when it does)
    cache_policy: str = "lru"  # what the cache keeps: the kernel's page cache is an LRU
    remote_share: float = 1.0  # share of the backend's reads that cross the node's storage network
    staging: Staging | None = None  # the copy an option needs before it trains

    @property
    def key(self) -> str:
        return RATE_KEYS.get(self.setup, "")


def _from_cells(cal: Calibration | None, key: str) -> Figure | None:
    """The measured bandwidth of the best tier of ``key``'s kinds in a sweep, if one measured it: a
    local tier on a shared file system measures a parallel file system, not the NVMe."""
    if cal is None:
        return None
    on_pfs = {n for n, t in cal.tiers.items() if t.measured_on and t.measured_on.device_kind == "pfs"}
    pool = replace(cal, tiers={n: t for n, t in cal.tiers.items() if (n in on_pfs) == (key == "pfs")})
    tier = pool.tier_of_kind(("local", "cephfs") if key == "pfs" else BACKEND_KINDS[key])
    if tier is None or tier.bandwidth is None:
        return None
    f = tier.bandwidth
    where = f"tier {tier.name!r} ({tier.kind}), {f.source}"
    return replace(f, source=f"measured: {'at least ' if f.lower_bound else ''}{where}")


def nvme_array(s: Scenario, cal: Calibration | None) -> Figure:
    """The node's NVMe array: given (the array, else a drive x the drives), measured by a sweep on
    this kind of storage, else the drives' datasheet. A measured lower bound (the tier never held
    a cell back) replaces the datasheet only where it is larger."""
    from .servers import nvme_read_per_device

    devices = max(1, s.nvme_devices)
    if given := s.rates.tier("nvme"):
        return given
    if each := s.rates.tier("nvme-device"):
        return replace(each, value=each.value * devices, source=f"{devices} drive(s) x {each.source}")
    sheet = s.nvme_device_rate or nvme_read_per_device(None)
    datasheet = replace(
        sheet, value=sheet.value * devices, source=f"{devices} drive(s) in RAID0 x {sheet.source}"
    )
    measured = _from_cells(cal, "nvme")
    if measured is None:
        return datasheet
    if not measured.lower_bound or measured.value > datasheet.value:
        return measured
    return replace(datasheet, source=f"{datasheet.source}; {measured.source} (a lower bound)")


def remote(s: Scenario, cal: Calibration | None, key: str) -> Figure | None:
    """What one node reads from a shared store: given, else measured by a sweep; capped by the
    node's storage network. None: nobody gave or measured it."""
    f = s.rates.tier(key) or _from_cells(cal, key)
    nic = s.nic_bytes_per_s
    if f is None or nic is None or f.value <= nic:
        return f
    return replace(
        f, value=nic, source=f"{f.source}; capped by the node's storage network, {nic / 1e9:,.3g} GB/s"
    )


def page_cache(s: Scenario) -> Figure:
    return replace(
        RAM_PER_READER,
        value=RAM_PER_READER.value * s.cores,
        source=f"{RAM_PER_READER.value / 1e9:.1f} GB/s per reader x {s.cores} cores: {RAM_PER_READER.source}",
    )


def _sharded(s: Scenario, nvme: Figure) -> Figure:
    """What a node reads when it holds 1/N of the dataset: its own share from its array, the rest
    from its peers' arrays over the storage network, each node's array serving its own reads and
    its share of every peer's (so at most the array's rate in all), times adding."""
    n = s.nodes
    fabric = min(nvme.value, s.nic_bytes_per_s) if s.nic_bytes_per_s else nvme.value
    rate = min(nvme.value, s.mix.rate(1.0 / n, nvme.value, fabric))
    net = (
        f"the storage network at {s.nic_bytes_per_s / 1e9:,.3g} GB/s"
        if s.nic_bytes_per_s
        else "the storage network (not modelled: taken as the array's rate; --nic to give it)"
    )
    return replace(
        nvme,
        value=rate,
        source=f"1/{n} from the node's own array and {n - 1}/{n} from its peers' over {net}, "
        f"{RULE_WORDS[s.mix.rule]}; the array: {nvme.source}",
        origin="derived" if nvme.origin in ("published", "reference") else nvme.origin,
    )


def _local_setups(s: Scenario, cal: Calibration | None, sources: dict[str, Figure]) -> list[Storage]:
    nvme, ram = nvme_array(s, cal), page_cache(s)
    in_ram = min(s.memory_cache, s.dataset_bytes)
    short = (
        ""
        if s.nvme_bytes >= s.dataset_bytes
        else f"the dataset ({s.units.size(s.dataset_bytes)}) is larger than a node's NVMe "
        f"({s.units.size(s.nvme_bytes)})"
    )
    out = [
        Storage(
            "local NVMe",
            "local",
            BACKEND_KINDS["nvme"],
            nvme,
            ram,
            in_ram,
            True,
            short,
            remote_share=0.0,
            staging=staging(s, s.dataset_bytes, sources),
        )
    ]
    if s.nodes > 1:
        share = s.dataset_bytes / s.nodes
        short = (
            ""
            if s.nvme_bytes >= share
            else f"its 1/{s.nodes} ({s.units.size(share)}) is larger than a node's NVMe ({s.units.size(s.nvme_bytes)})"
        )
        out.append(
            Storage(
                f"local NVMe, sharded over {s.nodes} nodes",
                "sharded",
                BACKEND_KINDS["nvme"],
                _sharded(s, nvme),
                ram,
                in_ram,
                True,
                short,
                remote_share=(s.nodes - 1) / s.nodes,
                staging=staging(s, share, sources),
            )
        )
    return out


def _shared_setups(s: Scenario, cal: Calibration | None, known: dict[str, Figure | None]) -> list[Storage]:
    nvme, ram = nvme_array(s, cal), page_cache(s)
    in_ram = min(s.memory_cache, s.dataset_bytes)
    nvme_cache = nvme if s.nvme_bytes else None
    nvme_policy = choose_policy(s.cache_policy, int(s.nvme_bytes), int(s.dataset_bytes))
    out = [
        Storage("parallel file system", "pfs", BACKEND_KINDS["pfs"], known["pfs"], ram, in_ram, True),
        Storage(
            "object store + NVMe cache",
            "object+nvme",
            BACKEND_KINDS["object"],
            known["object"],
            nvme_cache,
            s.nvme_bytes,
            False,
            cache_policy=nvme_policy,
        ),
    ]
    if known["ceph"] is not None:  # Ceph's RADOS Gateway is an object store too
        out.append(
            Storage(
                "Ceph (RGW) + NVMe cache",
                "ceph+nvme",
                ("s3", *BACKEND_KINDS["ceph"]),
                known["ceph"],
                nvme_cache,
                s.nvme_bytes,
                False,
                cache_policy=nvme_policy,
            )
        )
    out.append(
        Storage(
            "Ceph + RAM cache",
            "ceph+ram",
            BACKEND_KINDS["ceph"],
            known["ceph"],
            ram,
            in_ram,
            True,
            cache_policy=choose_policy(s.cache_policy, int(s.memory_cache), int(s.dataset_bytes)),
        )
    )
    return out


def _what_ifs(cal: Calibration | None) -> list[Storage]:
    out = []
    for tier in cal.tiers.values() if cal else []:
        if tier.kind == "throttled" and tier.bandwidth is not None:
            f = tier.bandwidth
            source = (
                f"measured: {'at least ' if f.lower_bound else ''}tier {tier.name!r} (throttled), {f.source}"
            )
            out.append(
                Storage(
                    f"what-if {tier.name}",
                    "what-if",
                    ("throttled",),
                    replace(f, source=source),
                    None,
                    0.0,
                    False,
                )
            )
    return out


def storages(s: Scenario, cal: Calibration | None) -> list[Storage]:
    """Every setup for ``s``'s node, in SETUP_ORDER."""
    known = {key: remote(s, cal, key) for key in ("pfs", "object", "ceph")}
    sources = {key: f for key, f in known.items() if f is not None}
    return [*_local_setups(s, cal, sources), *_shared_setups(s, cal, known), *_what_ifs(cal)]
