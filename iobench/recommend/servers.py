"""The node a recommendation is for: described by the flags, completed from a named reference
profile (configs/servers.yaml) or from an ``iobench inspect --json`` document of the node itself,
never silently this machine.

``--server this-host`` models the machine the command runs on (its RAM and usable cores; its NVMe
only from ``--nvme``); ``--inspect FILE`` the node that ``iobench inspect --json`` described (its
cores, RAM, data NVMe with their PCIe generation, its GPUs); any other name is a profile. Without
``--server`` a profile is taken only when a figure is missing, and only the one for the accelerator
type asked for; with no such profile, recommend asks for the missing flags.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from .calibrate import Figure

THIS_HOST = "this-host"
DEFAULT_NVME_GENERATION = 4  # what a data-centre U.2 drive of the last five years links at


@dataclass(frozen=True)
class Server:
    """One node: what a single host has for the input pipeline."""

    name: str
    description: str
    accelerators: str  # NxTYPE on one node; empty: not known
    cores: int
    ram: str
    nvme: str | None  # [N x]SIZE, None: no local NVMe
    nic: str | None  # words, e.g. "2x400Gb/s"
    nic_bytes_per_s: float | None
    source: str
    nvme_generation: int | None = None  # PCIe generation of the data drives' links; None: not known

    @property
    def accelerators_per_node(self) -> int | None:
        m = re.match(r"\s*(\d+)\s*[x×]", self.accelerators or "")
        return int(m.group(1)) if m else None

    def summary(self) -> str:
        gen = f" (PCIe Gen{self.nvme_generation})" if self.nvme and self.nvme_generation else ""
        parts = [f"{self.cores} cores", f"{self.ram} RAM", f"NVMe {self.nvme or 'none'}{gen}"]
        if self.accelerators:
            parts.insert(0, self.accelerators)
        if self.nic:
            parts.append(f"storage NIC {self.nic}")
        return f"{self.description} ({', '.join(parts)})"


def _config() -> dict:
    return yaml.safe_load(resources.files("iobench").joinpath("configs/servers.yaml").read_text())


def load_servers() -> dict[str, Server]:
    return {name: Server(name=name, **fields) for name, fields in _config()["servers"].items()}


def nvme_read_per_device(generation: int | None) -> Figure:
    """What one NVMe drive of ``generation`` reads (configs/servers.yaml, a vendor's datasheet);
    an unknown generation is taken as DEFAULT_NVME_GENERATION and said so."""
    table = _config()["nvme_read_per_device"]
    known = generation in table
    entry = table[generation if known else DEFAULT_NVME_GENERATION]
    said = "" if known else f"the drives' PCIe generation is not known: Gen{DEFAULT_NVME_GENERATION} taken; "
    return Figure(
        float(entry["bytes_per_s"]),
        f"{said}datasheet: {' '.join(entry['source'].split())} (--nvme-gen or --tier-rate nvme-device=RATE)",
        origin="published",
    )


def known_generations() -> tuple[int, ...]:
    return tuple(sorted(_config()["nvme_read_per_device"]))


def profile(name: str) -> Server:
    servers = load_servers()
    if name not in servers:
        raise ValueError(
            f"--server {name}: unknown; known: {', '.join(sorted(servers))} (configs/servers.yaml), "
            f"or {THIS_HOST} for this machine, or --inspect FILE for a node `iobench inspect --json` described"
        )
    return servers[name]


def for_accelerator(kind: str) -> Server | None:
    """The reference node built around accelerators of ``kind`` (e.g. "h100"), if there is one."""
    return next(
        (s for s in load_servers().values() if s.accelerators.lower().split("x", 1)[-1] == kind.lower()),
        None,
    )


def this_server() -> Server:
    import socket

    from iobench.host.cores import usable_cores
    from iobench.host.memory import usable_memory
    from iobench.host.units import format_bytes

    return Server(
        name=THIS_HOST,
        description=f"this machine, {socket.gethostname()}",
        accelerators="",
        cores=usable_cores(),
        ram=format_bytes(usable_memory().total),
        nvme=None,
        nic=None,
        nic_bytes_per_s=None,
        source="measured on this machine (the usable cores and memory of this process: affinity, cgroup limits)",
    )


_GTS_TO_GEN = {"2.5": 1, "5.0": 2, "8.0": 3, "16.0": 4, "32.0": 5, "64.0": 6}


def _generation(link: dict | None) -> int | None:
    """PCIe generation of a link from sysfs's speed string ("16.0 GT/s PCIe" -> 4)."""
    speed = (link or {}).get("current_speed") or ""
    m = re.match(r"\s*([\d.]+)\s*GT/s", speed)
    return _GTS_TO_GEN.get(f"{float(m.group(1)):.1f}") if m else None


def _data_nvme(inv: dict) -> list[dict]:
    """The NVMe drives a dataset could live on: not the operating system's (a drive whose
    partition holds ``/``, or a member of a RAID1 array: the mirrored boot pair of a DGX)."""
    root = next((f["source"] for f in inv.get("filesystems") or [] if f["mount_point"] == "/"), "")
    mirrored = {m for r in inv.get("raid") or [] if r.get("level") == "raid1" for m in r["members"]}
    return [
        d
        for d in inv.get("nvme") or []
        if d["name"] not in mirrored and not root.startswith(f"/dev/{d['name']}")
    ]


def from_inspect(path: str) -> Server:
    """The node an ``iobench inspect --json`` document describes (``--inspect FILE``)."""
    from iobench.host.units import format_bytes

    try:
        doc = json.loads(Path(path).read_text())
        inv = doc["inventory"]
        cpu, memory = inv["cpu"], inv["memory"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"--inspect {path}: not an `iobench inspect --json` document ({exc}); "
            "write one with `iobench inspect --json > FILE` on the node"
        ) from None
    physical, usable = cpu.get("physical_cores"), cpu.get("usable_cpus") or cpu.get("logical_cpus")
    cores = min(n for n in (physical, usable) if n) if (physical or usable) else None
    ram = memory.get("cgroup_limit_bytes") or memory.get("total_bytes")
    if not cores or not ram:
        raise ValueError(
            f"--inspect {path}: the document gives no CPU count or no memory; give --cores and --ram"
        )
    drives = _data_nvme(inv)
    sizes = {d["size_bytes"] for d in drives if d.get("size_bytes")}
    gens = [g for d in drives if (g := _generation(d.get("pcie_link")))]
    nvme = None
    if drives and sizes:
        each = min(sizes)  # a RAID0 stripes at its smallest member's size
        nvme = f"{len(drives)}x{each}B"
    gpus = inv.get("gpus") or []
    where = f"`iobench inspect --json` of {doc.get('inventory', {}).get('root', '/')} ({path})"
    return Server(
        name=f"inspect:{Path(path).name}",
        description=f"the node described by {path} ({cpu.get('model') or 'CPU unknown'})",
        accelerators=f"{len(gpus)}x{gpus[0]['name']}" if gpus else "",
        cores=int(cores),
        ram=f"{int(ram)}B",
        nvme=nvme,
        nic=None,
        nic_bytes_per_s=None,
        source=f"{where}: physical cores (SMT siblings add little decode){', capped by the usable CPUs' if usable else ''}; "
        f"RAM {format_bytes(ram)}; data NVMe {', '.join(d['name'] for d in drives) or 'none'} "
        "(not the OS drives); the storage network is not known from it (the storage NICs cannot be told "
        "from the compute fabric): give --nic",
        nvme_generation=min(gens) if gens else None,
    )
