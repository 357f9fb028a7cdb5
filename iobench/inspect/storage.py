"""Block storage and filesystems: NVMe namespaces with their PCIe link and NUMA node, md RAID
arrays, other disks, and the mounted filesystems worth training from.

The per-device description (model, size, PCIe link against its capability, RAID level, state and
members) is `iobench.host.blockdev`'s, the one the tiers record in every run's manifest; this
module adds what an inventory needs on top: every device at once, NUMA nodes, mounts.
"""

from __future__ import annotations

import os
import re

from iobench.host.blockdev import describe_block_device, parse_mountinfo
from iobench.host.sysfs import list_dir, read_numa_node, read_text, under

# not storage a dataset lives on: loop devices (snaps, images), RAM disks, optical and floppy drives
_SKIP_DISKS = ("loop", "ram", "zram", "sr", "fd", "nbd")
# filesystems with a dataset behind them although no local block device: network, FUSE, VM shares
_REMOTE_FS = ("nfs", "nfs4", "cifs", "smb3", "ceph", "lustre", "gpfs", "beegfs", "9p", "virtiofs", "overlay")


def block_devices(root: str) -> dict[str, list[dict]]:
    """{"nvme": [...], "raid": [...], "disks": [...]} from /sys/block."""
    sys_root, proc_root = under(root, "sys"), under(root, "proc")
    out: dict[str, list[dict]] = {"nvme": [], "raid": [], "disks": []}
    for name in list_dir(under(root, "sys/block")):
        if name.startswith(_SKIP_DISKS):
            continue
        desc = describe_block_device(name, sys_root, proc_root)
        disk_dir = under(root, "sys/block", name)
        if name.startswith("nvme"):
            out["nvme"].append(_nvme(name, desc, disk_dir))
        elif "raid" in desc:
            out["raid"].append(_raid(name, desc))
        elif desc["size_bytes"]:
            keep = ("name", "transport", "model", "size_bytes", "rotational")
            out["disks"].append({k: desc[k] for k in keep})
    return out


def _controller_dir(disk_dir: str) -> str:
    """The namespace's controller (its ``device`` is the PCI function). A multipath head disk has no
    controller of its own: take its first path's."""
    paths = list_dir(os.path.join(disk_dir, "multipath"))
    if not os.path.isdir(os.path.join(disk_dir, "device")) and paths:
        return os.path.join(disk_dir, "multipath", paths[0], "device")
    return os.path.join(disk_dir, "device")


def _nvme(name: str, desc: dict, disk_dir: str) -> dict:
    controller_dir = _controller_dir(disk_dir)
    link = desc.get("pcie_link")
    return {
        "name": name,
        "controller": re.sub(r"n\d+$", "", name),  # nvme0n1 -> nvme0
        "model": desc["model"],
        "size_bytes": desc["size_bytes"],
        "transport": read_text(os.path.join(controller_dir, "transport")),  # pcie, or tcp/rdma/fc (NVMe-oF)
        "pci_address": read_text(os.path.join(controller_dir, "address")),
        "numa_node": read_numa_node(os.path.join(controller_dir, "device")),
        "pcie_link": {k: v for k, v in link.items() if k != "pci_address"} if link else None,
        "in_arrays": list_dir(os.path.join(disk_dir, "holders")),
    }


def _raid(name: str, desc: dict) -> dict:
    raid = desc["raid"]
    return {
        "name": name,
        "level": raid["level"],
        "raid_disks": raid["raid_disks"],
        "members": [m["name"] for m in raid["members"]],
        "state": raid["state"],
        "chunk_size_bytes": raid["chunk_size_bytes"],
        "size_bytes": desc["size_bytes"],
    }


def filesystems(root: str) -> list[dict]:
    """Mounted filesystems a dataset could live on (block-backed, network or shared, /dev/shm).
    Sizes come from statvfs on a live host only: a recorded tree's mount points are not here."""
    live = os.path.realpath(root) == "/"
    by_mount_point: dict[str, dict] = {}
    for m in parse_mountinfo(read_text(under(root, "proc/self/mountinfo")) or ""):
        fs = m["fs_type"]
        block_backed = m["major"] != 0 and not m["source"].startswith("/dev/loop")
        if not (block_backed or fs in _REMOTE_FS or fs.startswith("fuse.") or m["mount_point"] == "/dev/shm"):
            continue
        entry = {
            "mount_point": m["mount_point"],
            "fs_type": fs,
            "source": m["source"],
            "size_bytes": None,
            "free_bytes": None,
        }
        if live:
            try:
                st = os.statvfs(m["mount_point"])
                entry["size_bytes"] = st.f_blocks * st.f_frsize
                entry["free_bytes"] = st.f_bavail * st.f_frsize
            except OSError:
                pass  # a stale network mount or one this user may not stat: listed without a size
        by_mount_point[m["mount_point"]] = entry  # a later mount over the same point hides the earlier
    return list(by_mount_point.values())
