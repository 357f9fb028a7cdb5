"""The server a recommendation is for: described by the flags, completed from a named reference
profile (configs/servers.yaml), never silently this machine.

``--server this-host`` models the machine the command runs on (its RAM and usable cores; its NVMe
only from ``--nvme``); any other name is a profile. Without ``--server`` a profile is taken only
when a figure is missing, and only the one for the accelerator type asked for; with no such
profile, recommend asks for the missing flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

THIS_HOST = "this-host"


@dataclass(frozen=True)
class Server:
    name: str
    description: str
    accelerators: str  # NxTYPE
    cores: int
    ram: str
    nvme: str | None  # [N x]SIZE, None: no local NVMe
    nic: str | None  # words, e.g. "2x400Gb/s"
    nic_bytes_per_s: float | None
    source: str

    def summary(self) -> str:
        parts = [f"{self.cores} cores", f"{self.ram} RAM", f"NVMe {self.nvme or 'none'}"]
        if self.nic:
            parts.append(f"storage NIC {self.nic}")
        return f"{self.description} ({', '.join(parts)})"


def load_servers() -> dict[str, Server]:
    doc = yaml.safe_load(resources.files("iobench").joinpath("configs/servers.yaml").read_text())
    return {name: Server(name=name, **fields) for name, fields in doc["servers"].items()}


def profile(name: str) -> Server:
    servers = load_servers()
    if name not in servers:
        raise ValueError(
            f"--server {name}: unknown; known: {', '.join(sorted(servers))} (configs/servers.yaml), "
            f"or {THIS_HOST} for this machine"
        )
    return servers[name]


def for_accelerator(kind: str) -> Server | None:
    """The reference server built around accelerators of ``kind`` (e.g. "h100"), if there is one."""
    return next(
        (s for s in load_servers().values() if s.accelerators.lower().split("x", 1)[-1] == kind.lower()),
        None,
    )


def this_host() -> Server:
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
