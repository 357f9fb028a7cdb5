"""The host-level pitfalls that starve accelerators before any benchmark runs.

Each check says what it saw (evidence) and what to do; a check that lacks what it needs (no GPU,
no NUMA information, no demand) stays silent and leaves a note saying so. docs/inspect.md gives
each rule and its source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from iobench.analysis.decoderate import DecodeRate
from iobench.host.units import format_bytes

from .accelerators import AcceleratorDemand
from .cores import estimate_cores, trainer_cost
from .inventory import Inventory

RAM_PER_GPU_MEMORY = (
    4  # host RAM >= 4x total GPU memory: a rule of thumb (docs/recommend.md 'Published claims')
)
SEVERITIES = ("high", "warning", "info")


@dataclass(frozen=True)
class Pitfall:
    check: str
    severity: str  # one of SEVERITIES
    what: str
    evidence: str
    advice: str


def _ram_vs_gpu_memory(inv: Inventory, demand: AcceleratorDemand | None) -> Pitfall | str | None:
    limit = inv.memory.get("cgroup_limit_bytes")  # a container's: what the job may hold
    ram = limit or inv.memory.get("total_bytes")
    if inv.gpus:
        gpu_memory = sum(g["memory_total_bytes"] for g in inv.gpus)
        what_gpus = f"{len(inv.gpus)} GPU(s) with {format_bytes(gpu_memory)} of memory in all (NVML)"
    elif demand and demand.memory_bytes_each:
        gpu_memory = demand.count * demand.memory_bytes_each
        what_gpus = f"{demand.count}x {demand.type} (--accelerators) with {format_bytes(gpu_memory)} in all"
    else:
        return None
    if not ram:
        return "RAM vs GPU memory: /proc/meminfo gave no MemTotal"
    if ram >= RAM_PER_GPU_MEMORY * gpu_memory:
        return None
    return Pitfall(
        "ram_vs_gpu_memory",
        "warning",
        f"host RAM is below {RAM_PER_GPU_MEMORY}x the total GPU memory",
        f"RAM {format_bytes(ram)}{' (the memory cgroup limit)' if limit else ''}; {what_gpus}; the rule of thumb asks for at least "
        f"{format_bytes(RAM_PER_GPU_MEMORY * gpu_memory)} ({ram / gpu_memory:.2g}x here)",
        "A rule of thumb, not a law: host RAM holds the page cache that makes warm epochs fast, the "
        "loaders' prefetch and pinned staging buffers, and any RAM cache tier. With less, expect warm "
        "epochs to re-read storage; check with `iobench sweep` (cold vs warm) before buying RAM.",
    )


def _nvme_links(inv: Inventory) -> list[Pitfall]:
    found = []
    for dev in inv.nvme:
        link = dev.get("pcie_link") or {}
        if not link.get("degraded"):
            continue
        arrays = ", ".join(dev["in_arrays"])
        found.append(
            Pitfall(
                "nvme_link_degraded",
                "high",
                f"{dev['name']}'s PCIe link runs below its capability",
                f"{link['note']} (sysfs current_link_speed/width vs max_link_speed/width)"
                + (
                    f"; it is a member of {arrays}, and a striped array runs at its slowest member's pace"
                    if arrays
                    else ""
                ),
                "Reseat the drive or move it to a slot wired for its full width; check the BIOS PCIe "
                "generation and bifurcation settings and the riser/cable; confirm with `lspci -vv` (LnkSta vs LnkCap).",
            )
        )
    return found


def _by_node(placement: dict) -> str:
    """{"nvme0n1": 0, "nvme1n1": 1} → "node 0: nvme0n1; node 1: nvme1n1"."""
    nodes = sorted(set(placement.values()))
    return "; ".join(f"node {n}: {', '.join(str(k) for k, v in placement.items() if v == n)}" for n in nodes)


def _numa_split(inv: Inventory) -> Pitfall | str | None:
    if not inv.gpus or not inv.nvme:
        return None
    gpu_nodes = {g["index"]: g["numa_node"] for g in inv.gpus}
    nvme_nodes = {d["name"]: d["numa_node"] for d in inv.nvme}
    if None in gpu_nodes.values() or None in nvme_nodes.values():
        return "NUMA: the GPUs' or NVMe devices' NUMA node is unknown (-1 in sysfs); not checked"
    far = sorted(i for i, node in gpu_nodes.items() if node not in set(nvme_nodes.values()))
    if not far:
        return None
    return Pitfall(
        "numa_split",
        "warning",
        "GPUs and NVMe sit on different NUMA nodes",
        f"GPUs by node: {_by_node(gpu_nodes)}. NVMe by node: {_by_node(nvme_nodes)}. "
        f"GPU(s) {', '.join(map(str, far))} have no NVMe on their node: what is read from NVMe lands in "
        "another node's memory and crosses the inter-socket link on its way to them",
        "Bind each rank's loader workers and pinned memory to its GPU's node (`numactl --cpunodebind=N "
        "--membind=N`, or torchrun with per-rank affinity), and keep that rank's data or cache on NVMe "
        "of the same node; or move drives or GPUs so that each node has both.",
    )


def _rdma(inv: Inventory, demand: AcceleratorDemand | None) -> Pitfall | None:
    if not inv.gpus and demand is None:
        return None  # not a training host as far as we know
    if any(p["state"] == "ACTIVE" for d in inv.rdma for p in d["ports"]):
        return None
    if inv.rdma:
        evidence = f"RDMA device(s) {', '.join(d['name'] for d in inv.rdma)} present but no port is ACTIVE"
    else:
        evidence = "no RDMA device in /sys/class/infiniband (no InfiniBand, RoCE or iWARP)"
    fastest = max((n["speed_mbps"] or 0 for n in inv.nics if not n["virtual"]), default=0)
    if fastest:
        evidence += f"; the fastest NIC runs at {fastest / 1000:g} Gb/s"
    return Pitfall(
        "no_rdma",
        "info",
        "no usable RDMA: matters for multi-node training",
        evidence,
        "Single-node training does not need it. Across nodes, gradient all-reduce (NCCL) and reads "
        "from remote storage (Ceph, S3) then go over TCP: expect lower bandwidth and more CPU; use "
        "InfiniBand or RoCE NICs (and GPUDirect RDMA) for multi-node jobs.",
    )


def _usable(inv: Inventory) -> int | None:
    known = [n for n in (inv.cpu.get("logical_cpus"), inv.cpu.get("usable_cpus")) if n]
    return min(known) if known else None


def _oversubscribed(
    inv: Inventory, demand: AcceleratorDemand | None, workers: int | None
) -> Pitfall | str | None:
    if workers is None:
        return None
    if demand is None:
        return "workers vs cores: no accelerators (no GPU matched, no --accelerators); not checked"
    usable = _usable(inv)
    if usable is None:
        return "workers vs cores: the CPU count is unknown; not checked"
    cost = trainer_cost(demand)
    trainer = cost.reserved_cores * demand.count if cost else 0
    wanted = workers * demand.count + trainer
    if wanted <= usable:
        return None
    return Pitfall(
        "workers_oversubscribe_cores",
        "warning",
        "loader workers and trainers want more cores than the host has",
        f"{workers} worker(s) x {demand.count} rank(s) + {trainer} core(s) for the {demand.count} trainer "
        f"process(es) ({f'{cost.reserved_cores} each: {cost.describe()}' if cost else 'none: a sleep'}) = "
        f"{wanted}, and {usable} are usable",
        "Workers that take the trainers' cores slow the training step itself (on an H200 server a ResNet-50 "
        "step ran 1.9-2.4x slower beside 8-14 CPU-decoding workers, and 14 workers trained slower than 8: "
        "docs/method.md, The trainer's host). Use fewer "
        "workers, or decode on the GPU; `iobench diagnose` with several worker counts finds the fastest.",
    )


def _cores(inv: Inventory, demand: AcceleratorDemand | None, rate: DecodeRate | None) -> Pitfall | str | None:
    if demand is None:
        return "cores for decode: no accelerator demand (no GPU matched, no --accelerators); not checked"
    if demand.kind == "mlperf_storage":
        return "cores for decode: MLPerf Storage's emulation reads without decoding; not checked"
    if rate is None:
        return "cores for decode: no per-core decode rate (--decode-rate or --results); not checked"
    logical, usable = inv.cpu.get("logical_cpus"), inv.cpu.get("usable_cpus")
    known = [n for n in (logical, usable) if n]
    if not known:
        return "cores for decode: the CPU count is unknown; not checked"
    cores = min(known)
    need = estimate_cores(demand, rate)
    needed, trainer = need.total, need.trainer_per_accelerator * demand.count
    if needed <= cores:
        return None
    if usable and logical and usable < logical:
        have = f"this process may use {usable} of the host's {logical} logical CPUs (affinity or container)"
    else:
        physical = inv.cpu.get("physical_cores")
        smt = f" ({physical} physical cores)" if physical and physical < cores else ""
        have = f"this host has {cores} logical CPUs{smt}"
    return Pitfall(
        "too_few_cores",
        "high",
        "too few CPU cores to decode and augment at the accelerators' demand",
        f"{demand.count}x {demand.type} {demand.kind} {demand.model} demand {demand.samples_per_s:,.0f} samples/s "
        f"({demand.samples_per_s_each:,.0f} each: {demand.source.rstrip('.')}); decode+augment runs at "
        f"{rate.describe(demand.sample_bytes)} ({demand.sample_said}); with {trainer} core(s) kept for the "
        f"trainers, at least {math.ceil(needed)} cores are needed ({need.per_accelerator:.1f} per accelerator) "
        f"and {have}",
        "Decode on the GPU (DALI with device='mixed'), store pre-resized or lower-quality JPEGs, or use a "
        "host with more cores; `iobench diagnose` measures the prep ceiling of the real loader.",
    )


def find_pitfalls(
    inv: Inventory,
    demand: AcceleratorDemand | None = None,
    rate: DecodeRate | None = None,
    workers: int | None = None,
) -> tuple[list[Pitfall], list[str]]:
    """The pitfalls, most severe first, and notes on the checks that could not run. ``workers``:
    the loader workers each rank (one per accelerator) runs, where given."""
    results: list[Pitfall | str | None] = [
        _oversubscribed(inv, demand, workers),
        _ram_vs_gpu_memory(inv, demand),
        *_nvme_links(inv),
        _numa_split(inv),
        _rdma(inv, demand),
        _cores(inv, demand, rate),
    ]
    pitfalls = [r for r in results if isinstance(r, Pitfall)]
    notes = [r for r in results if isinstance(r, str)]
    return sorted(pitfalls, key=lambda p: SEVERITIES.index(p.severity)), notes
