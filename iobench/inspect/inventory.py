"""Everything `iobench inspect` knows about a host, gathered once, as plain data."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from iobench.host.cores import usable_cores
from iobench.host.memory import usable_memory
from loaders.observe import Nvml, NvmlUnavailable
from loaders.storage import ResolvedClient, installed_clients, resolve_client

from .host import cpu_info, memory, numa_nodes
from .network import nics, rdma_devices
from .storage import block_devices, filesystems


@dataclass
class Inventory:
    root: str
    cpu: dict
    numa_nodes: list[dict]
    memory: dict
    nvme: list[dict]
    raid: list[dict]
    disks: list[dict]
    filesystems: list[dict]
    nics: list[dict]
    rdma: list[dict]
    gpus: list[dict]
    notes: list[str] = field(default_factory=list)  # what is absent or unknown, and why


@dataclass(frozen=True)
class ObjectClients:
    """The object clients an S3 tier run from this Python can read with (not the recorded tree's)."""

    installed: tuple[ResolvedClient, ...]
    auto: ResolvedClient  # what `client: auto` reads with

    @classmethod
    def here(cls) -> ObjectClients:
        return cls(tuple(installed_clients()), resolve_client("auto"))


def _gpus(root: str, nvml_lib: Any) -> tuple[list[dict], str | None]:
    if nvml_lib is None and os.path.realpath(root) != "/":
        return [], "GPUs: not read; NVML describes the live machine, not the recorded tree under --root"
    try:
        with Nvml(nvml_lib, sysfs_root=root) as nvml:
            return [asdict(g) for g in nvml.gpus()], None
    except NvmlUnavailable as exc:
        return [], f"GPUs: none found through NVML: {exc}"


def collect_inventory(root: str = "/", nvml_lib: Any = None) -> Inventory:
    """Read the host under ``root``; ``nvml_lib`` replaces pynvml (tests pass a fake)."""
    blocks = block_devices(root)
    gpus, gpu_note = _gpus(root, nvml_lib)
    inv = Inventory(
        root=root,
        cpu=cpu_info(root),
        numa_nodes=numa_nodes(root),
        memory=memory(root),
        nvme=blocks["nvme"],
        raid=blocks["raid"],
        disks=blocks["disks"],
        filesystems=filesystems(root),
        nics=nics(root),
        rdma=rdma_devices(root),
        gpus=gpus,
    )
    if os.path.realpath(root) == "/":
        inv.cpu["usable_cpus"] = usable_cores()
        limit = usable_memory().limit
        if limit is not None:  # a container's: the host's MemTotal is not this process's to use
            inv.memory["cgroup_limit_bytes"] = limit
    if gpu_note:
        inv.notes.append(gpu_note)
    if not inv.nvme:
        inv.notes.append("NVMe: no NVMe devices in /sys/block")
    if not inv.raid:
        inv.notes.append("RAID: no md arrays in /sys/block")
    if not inv.numa_nodes:
        inv.notes.append("NUMA: /sys/devices/system/node is absent (a kernel without NUMA): one node assumed")
    if not inv.rdma:
        inv.notes.append("RDMA: no devices in /sys/class/infiniband")
    return inv
