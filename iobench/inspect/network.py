"""NICs (/sys/class/net) and RDMA devices (/sys/class/infiniband: InfiniBand, RoCE, iWARP)."""

from __future__ import annotations

import os

from iobench.host.sysfs import list_dir, read_int, read_numa_node, read_text, under


def nics(root: str) -> list[dict]:
    """Every interface but loopback. ``virtual`` ones (bridges, veth, bonds, ifb) have no device."""
    base = under(root, "sys/class/net")
    out = []
    for name in list_dir(base):
        if name == "lo":
            continue
        path = os.path.join(base, name)
        speed = read_int(os.path.join(path, "speed"))  # Mb/s; EINVAL or -1 while the link is down
        device = os.path.join(path, "device")
        out.append(
            {
                "name": name,
                "operstate": read_text(os.path.join(path, "operstate")),
                "speed_mbps": speed if speed is not None and speed > 0 else None,
                "mtu": read_int(os.path.join(path, "mtu")),
                "virtual": not os.path.exists(device),
                "numa_node": read_numa_node(device),
            }
        )
    return out


def rdma_devices(root: str) -> list[dict]:
    base = under(root, "sys/class/infiniband")
    out = []
    for name in list_dir(base):
        ports = []
        for port in list_dir(os.path.join(base, name, "ports")):
            path = os.path.join(base, name, "ports", port)
            state = read_text(os.path.join(path, "state")) or ""  # "4: ACTIVE"
            ports.append(
                {
                    "port": int(port) if port.isdigit() else port,
                    "state": state.partition(":")[2].strip() or state or None,
                    "rate": read_text(os.path.join(path, "rate")),  # "200 Gb/sec (4X HDR)"
                    "link_layer": read_text(os.path.join(path, "link_layer")),  # InfiniBand | Ethernet
                }
            )
        out.append(
            {"name": name, "numa_node": read_numa_node(os.path.join(base, name, "device")), "ports": ports}
        )
    return out
