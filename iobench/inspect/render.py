"""The inspection on a terminal: inventory tables, then the pitfalls with their evidence and advice."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from iobench.analysis.decoderate import REFERENCE_SAMPLE_BYTES, DecodeRate
from iobench.host.units import format_bytes
from iobench.sweep.dryrun import clients_line

from .accelerators import AcceleratorDemand
from .cores import CoresEstimate
from .inventory import Inventory, ObjectClients
from .pitfalls import Pitfall

_SEVERITY_STYLE = {"high": "bold red", "warning": "yellow", "info": "cyan"}


def _size(n: int | None) -> str:
    return format_bytes(n) if n else "-"


def _opt(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for c in columns:
        table.add_column(c)
    return table


def _host(console: Console, inv: Inventory) -> None:
    cpu, mem = inv.cpu, inv.memory
    console.print(
        f"[bold]CPU[/bold] {_opt(cpu['model'])}: {_opt(cpu['logical_cpus'])} logical CPUs, "
        f"{_opt(cpu['physical_cores'])} physical cores, {_opt(cpu['sockets'])} socket(s)"
        + (
            f", {cpu['usable_cpus']} usable by this process"
            if cpu["usable_cpus"] != cpu["logical_cpus"] and cpu["usable_cpus"]
            else ""
        )
    )
    console.print(
        f"[bold]Memory[/bold] {_size(mem['total_bytes'])} total, {_size(mem['available_bytes'])} available"
        + (
            f"; this process's memory cgroup is limited to {_size(mem['cgroup_limit_bytes'])}"
            if mem.get("cgroup_limit_bytes")
            else ""
        )
    )
    if inv.numa_nodes:
        t = _table("NUMA nodes", "node", "CPUs", "count", "memory")
        for n in inv.numa_nodes:
            t.add_row(str(n["node"]), n["cpus"], str(n["cpu_count"]), _size(n["memory_bytes"]))
        console.print(t)


def _link(link: dict | None) -> tuple[str, str]:
    if not link:
        return "-", "-"
    now = f"{_opt(link['current_speed'])} x{_opt(link['current_width'])}"
    cap = f"{_opt(link['max_speed'])} x{_opt(link['max_width'])}"
    return (f"[red]{now}[/red]" if link.get("degraded") else now), cap


def _storage(console: Console, inv: Inventory) -> None:
    if inv.nvme:
        t = _table("NVMe", "device", "model", "size", "PCIe link now", "capable of", "NUMA", "array")
        for d in inv.nvme:
            t.add_row(
                d["name"], _opt(d["model"]), _size(d["size_bytes"]), *_link(d["pcie_link"]),
                _opt(d["numa_node"]), ", ".join(d["in_arrays"]) or "-",
            )  # fmt: skip
        console.print(t)
    if inv.raid:
        t = _table("md RAID", "array", "level", "disks", "members", "state", "chunk", "size")
        for r in inv.raid:
            t.add_row(
                r["name"], _opt(r["level"]), _opt(r["raid_disks"]), " ".join(r["members"]),
                _opt(r["state"]), _size(r["chunk_size_bytes"]), _size(r["size_bytes"]),
            )  # fmt: skip
        console.print(t)
    if inv.disks:
        t = _table("Other disks", "device", "transport", "model", "size", "rotational")
        for d in inv.disks:
            t.add_row(
                d["name"], d["transport"], _opt(d["model"]), _size(d["size_bytes"]), _opt(d["rotational"])
            )
        console.print(t)
    if inv.filesystems:
        t = _table("Filesystems", "mount point", "type", "source", "size", "free")
        for f in inv.filesystems:
            t.add_row(
                f["mount_point"], f["fs_type"], f["source"], _size(f["size_bytes"]), _size(f["free_bytes"])
            )
        console.print(t)


def _network(console: Console, inv: Inventory) -> None:
    physical = [n for n in inv.nics if not n["virtual"]]
    if physical:
        t = _table("NICs", "interface", "state", "speed", "MTU", "NUMA")
        for n in physical:
            speed = f"{n['speed_mbps'] / 1000:g} Gb/s" if n["speed_mbps"] else "-"
            t.add_row(n["name"], _opt(n["operstate"]), speed, _opt(n["mtu"]), _opt(n["numa_node"]))
        console.print(t)
    virtual = [n["name"] for n in inv.nics if n["virtual"]]
    if virtual:
        console.print(f"virtual interfaces (no device): {', '.join(virtual)}")
    if inv.rdma:
        t = _table("RDMA", "device", "port", "state", "rate", "link layer", "NUMA")
        for d in inv.rdma:
            for p in d["ports"] or [{"port": None, "state": None, "rate": None, "link_layer": None}]:
                t.add_row(
                    d["name"], _opt(p["port"]), _opt(p["state"]), _opt(p["rate"]),
                    _opt(p["link_layer"]), _opt(d["numa_node"]),
                )  # fmt: skip
        console.print(t)


def _gpus(console: Console, inv: Inventory) -> None:
    if not inv.gpus:
        return
    t = _table("GPUs (NVML)", "#", "name", "memory", "bus id", "PCIe gen now/max", "width now/max", "NUMA")
    for g in inv.gpus:
        t.add_row(
            str(g["index"]), g["name"], _size(g["memory_total_bytes"]), g["bus_id"],
            f"{_opt(g['pcie_gen_current'])}/{_opt(g['pcie_gen_max'])}",
            f"x{_opt(g['pcie_width_current'])}/x{_opt(g['pcie_width_max'])}", _opt(g["numa_node"]),
        )  # fmt: skip
    console.print(t)


def render_inspection(
    console: Console,
    inv: Inventory,
    demand: AcceleratorDemand | None,
    rate: DecodeRate | None,
    cores: CoresEstimate | None,
    clients: ObjectClients,
    pitfalls: list[Pitfall],
    notes: list[str],
) -> None:
    console.rule(f"iobench inspect ({inv.root})")
    _host(console, inv)
    _storage(console, inv)
    _network(console, inv)
    _gpus(console, inv)
    if demand:
        console.print(
            f"[bold]Demand[/bold] {demand.count}x {demand.type} {demand.kind} {demand.model} "
            f"(from {demand.found_by}): {demand.samples_per_s:,.0f} samples/s"
        )
    if rate:
        at = demand.sample_bytes if demand else REFERENCE_SAMPLE_BYTES
        console.print(f"[bold]Decode+augment[/bold] {rate.describe(at)}", highlight=False)
    if cores:
        console.print(
            f"[bold]Cores needed[/bold] {cores.total:.1f}: {cores.per_accelerator:.1f} per accelerator "
            f"({cores.decode_per_accelerator:.1f} decode+augment + {cores.trainer_per_accelerator} for its trainer); "
            f"{cores.counted}",
            highlight=False,
        )
    # as Text: the install hint's brackets are not markup
    console.print(
        Text(
            f"{clients_line(clients.installed)}; `client: auto` reads with {clients.auto} "
            "(the best measured one installed that survives a fork)"
        )
    )
    console.rule("pitfalls")
    if not pitfalls:
        console.print("[green]none found[/green] (the checks that could not run are listed below)")
    for p in pitfalls:
        console.print(Text.assemble((p.severity.upper(), _SEVERITY_STYLE[p.severity]), f" {p.what}"))
        console.print(f"  evidence: {p.evidence}", highlight=False)
        console.print(f"  what to do: {p.advice}", highlight=False)
    if notes:
        console.rule("notes")
        for n in notes:
            console.print(f"- {n}", highlight=False)
