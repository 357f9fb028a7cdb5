"""CPUs, NUMA nodes and memory, from /proc/cpuinfo, /proc/meminfo and /sys/devices/system/node."""

from __future__ import annotations

import re
from pathlib import Path

from iobench.host.memory import read_meminfo
from iobench.host.sysfs import list_dir, parse_cpulist, read_text, under


def cpu_info(root: str) -> dict:
    """Model, logical CPUs, physical cores and sockets. x86 cpuinfo names the package and core of
    every logical CPU; where it does not (most ARM kernels), cores and sockets stay unknown."""
    text = read_text(under(root, "proc/cpuinfo")) or ""
    model, logical, cores, sockets = None, 0, set(), set()
    for block in text.split("\n\n"):
        fields = dict(
            (key.strip(), value.strip())
            for key, sep, value in (line.partition(":") for line in block.splitlines())
            if sep
        )
        if "processor" not in fields:
            continue
        logical += 1
        model = model or fields.get("model name")
        if "physical id" in fields and "core id" in fields:
            sockets.add(fields["physical id"])
            cores.add((fields["physical id"], fields["core id"]))
    if not logical:
        online = read_text(under(root, "sys/devices/system/cpu/online"))
        logical = len(parse_cpulist(online)) if online else 0
    return {
        "model": model,
        "logical_cpus": logical or None,
        "physical_cores": len(cores) or None,
        "sockets": len(sockets) or None,
        "usable_cpus": None,  # the CPUs this process may run on: known on the live host only
    }


def numa_nodes(root: str) -> list[dict]:
    """One entry per NUMA node with its CPUs and memory; empty where the kernel has no NUMA support."""
    base = under(root, "sys/devices/system/node")
    nodes = []
    for name in list_dir(base):
        m = re.fullmatch(r"node(\d+)", name)
        if not m:
            continue
        cpulist = read_text(f"{base}/{name}/cpulist") or ""
        meminfo = read_text(f"{base}/{name}/meminfo") or ""
        total = re.search(r"MemTotal:\s+(\d+)\s*kB", meminfo)
        nodes.append(
            {
                "node": int(m.group(1)),
                "cpus": cpulist,
                "cpu_count": len(parse_cpulist(cpulist)),
                "memory_bytes": int(total.group(1)) * 1024 if total else None,
            }
        )
    return sorted(nodes, key=lambda n: n["node"])


def memory(root: str) -> dict:
    values = read_meminfo(Path(under(root, "proc/meminfo")))
    return {"total_bytes": values.get("MemTotal"), "available_bytes": values.get("MemAvailable")}
