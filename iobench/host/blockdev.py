"""What storage sits under a path: mount, block device, RAID layout, NVMe PCIe links.

Read from /proc/self/mountinfo and sysfs only (no root, no tools). Every sysfs file is
optional: VMs, containers and old kernels lack many of them, and a description with gaps
beats an exception in the middle of a benchmark. `sys_root`/`proc_root` let tests point
at recorded trees, which are plain directories, so lookups avoid relying on sysfs symlinks
where a name-based route exists.
"""

from __future__ import annotations

import os
import re
from typing import Any

from iobench.host.sysfs import read_int, read_text

__all__ = ["describe_block_device", "describe_path", "find_mount", "parse_mountinfo"]

# Filesystems with no local block device behind them; say what they are instead.
_NO_DEVICE_REASONS = {
    "overlay": "overlay filesystem (container layer): reads go to the layers' backing filesystems",
    "tmpfs": "tmpfs: the data lives in RAM, not on a block device",
    "ramfs": "ramfs: the data lives in RAM, not on a block device",
    "nfs": "network filesystem (NFS)",
    "nfs4": "network filesystem (NFS)",
    "cifs": "network filesystem (SMB/CIFS)",
    "ceph": "network filesystem (CephFS kernel client)",
    "9p": "9p filesystem shared from the hypervisor",
    "virtiofs": "virtiofs shared from the hypervisor",
    "zfs": "ZFS dataset: devices belong to the pool (see `zpool status`)",
}
_MAX_DEPTH = 4  # dm over md over partitions is three levels; deeper is a loop or very odd
_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal (\040 ...).
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mountinfo(text: str) -> list[dict[str, Any]]:
    """Parse /proc/self/mountinfo into dicts (mount_point, root, major, minor, fs_type, source)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 7:
            continue
        sep = fields.index("-")  # optional fields before it vary in number
        if len(fields) < sep + 3:
            continue
        major, _, minor = fields[2].partition(":")
        mounts.append(
            {
                "mount_point": _unescape(fields[4]),
                "root": _unescape(fields[3]),
                "major": int(major),
                "minor": int(minor),
                "fs_type": fields[sep + 1],
                "source": _unescape(fields[sep + 2]),
            }
        )
    return mounts


def find_mount(path: str, mounts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The mount holding `path`: longest mount-point prefix; the later mount wins a tie."""
    best: dict[str, Any] | None = None
    for m in mounts:
        mp = m["mount_point"]
        inside = mp == "/" or path == mp or path.startswith(mp.rstrip("/") + "/")
        if inside and (best is None or len(mp) >= len(best["mount_point"])):
            best = m
    return best


def _uevent(dev_dir: str) -> dict[str, str]:
    text = read_text(os.path.join(dev_dir, "uevent")) or ""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _parent_disk(name: str, sys_root: str) -> str | None:
    """The whole disk a partition belongs to (sys/block/<disk>/<part> exists)."""
    block = os.path.join(sys_root, "block")
    try:
        disks = sorted(os.listdir(block))
    except OSError:
        return None
    for disk in disks:
        if os.path.isdir(os.path.join(block, disk, name)):
            return disk
    return None


def _resolve_name(name: str, sys_root: str) -> tuple[str, str | None]:
    """(disk, partition-or-None) for a kernel block device name."""
    if os.path.isdir(os.path.join(sys_root, "block", name)):
        return name, None
    parent = _parent_disk(name, sys_root)
    return (parent, name) if parent else (name, None)


def _devnum_to_name(major: int, minor: int, sys_root: str) -> str | None:
    dev_dir = os.path.join(sys_root, "dev", "block", f"{major}:{minor}")
    name = _uevent(dev_dir).get("DEVNAME")
    if name:
        return name
    real = os.path.realpath(dev_dir)
    return os.path.basename(real) if os.path.isdir(real) and real != dev_dir else None


def _link_gts(speed: str | None) -> float | None:
    # "16.0 GT/s PCIe" on current kernels, "8 GT/s" on older ones, "Unknown" when down.
    m = re.match(r"\s*([0-9.]+)\s*GT/s", speed or "")
    return float(m.group(1)) if m else None


def _pcie_link(disk_dir: str) -> dict[str, Any] | None:
    # Plain: block/nvme0n1/device is the controller, device/device the PCI function.
    # Native multipath: the head disk's paths are under multipath/<nvme0c0n1>/device.
    candidates = [os.path.join(disk_dir, "device", "device")]
    mp_dir = os.path.join(disk_dir, "multipath")
    if os.path.isdir(mp_dir):
        candidates += [os.path.join(mp_dir, p, "device", "device") for p in sorted(os.listdir(mp_dir))]
    for pci in candidates:
        cur_speed = read_text(os.path.join(pci, "current_link_speed"))
        if cur_speed is None:
            continue
        link: dict[str, Any] = {
            "current_speed": cur_speed,
            "current_width": read_int(os.path.join(pci, "current_link_width")),
            "max_speed": read_text(os.path.join(pci, "max_link_speed")),
            "max_width": read_int(os.path.join(pci, "max_link_width")),
        }
        addr = os.path.basename(os.path.realpath(pci))
        # Recorded trees store the PCI function as a plain directory named "device".
        link["pci_address"] = addr if re.fullmatch(r"[0-9a-f]{4}:[0-9a-f:.]+", addr) else None
        cs, ms = _link_gts(link["current_speed"]), _link_gts(link["max_speed"])
        cw, mw = link["current_width"], link["max_width"]
        slow = cs is not None and ms is not None and cs < ms
        narrow = cw is not None and mw is not None and cw < mw
        link["degraded"] = slow or narrow
        if link["degraded"]:
            link["note"] = (
                f"PCIe link runs at {cur_speed} x{cw} but the device supports "
                f"{link['max_speed']} x{mw}: this drive's bandwidth is capped"
            )
        return link
    return None


def _transport(name: str) -> str:
    for prefix, kind in (
        ("nvme", "nvme"),
        ("vd", "virtio"),
        ("xvd", "xen"),
        ("sd", "scsi/sata/usb"),
        ("md", "md-raid"),
        ("dm-", "device-mapper"),
        ("loop", "loop"),
        ("zram", "zram"),
        ("rbd", "ceph-rbd"),
    ):
        if name.startswith(prefix):
            return kind
    return "unknown"


def _mdstat_entry(name: str, proc_root: str) -> dict[str, Any]:
    text = read_text(os.path.join(proc_root, "mdstat")) or ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        # "md0 : active raid0 nvme3n1[3] nvme2n1[2] ..." then "... 512k chunks [UU_U]"
        m = re.match(
            rf"^{re.escape(name)}\s*:\s*(\S+)\s+(?:\(\S+\)\s+)?(raid\d+|linear)?\s*(.*)$",
            line,
        )
        if not m:
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        chunk = re.search(r"(\d+)k chunk", nxt)
        status = re.search(r"\[([U_]+)\]", nxt)
        return {
            "array_state": m.group(1),
            "level": m.group(2),
            "members": [re.sub(r"\[\d+\].*$", "", t) for t in m.group(3).split()],
            "chunk_size_bytes": int(chunk.group(1)) * 1024 if chunk else None,
            "degraded": status.group(1).count("_") if status else None,
        }
    return {}


def _md_info(name: str, disk_dir: str, sys_root: str, proc_root: str, depth: int) -> dict:
    md = os.path.join(disk_dir, "md")
    fallback = _mdstat_entry(name, proc_root)
    info: dict[str, Any] = {
        "level": read_text(os.path.join(md, "level")) or fallback.get("level"),
        "chunk_size_bytes": read_int(os.path.join(md, "chunk_size")) or fallback.get("chunk_size_bytes"),
        "raid_disks": read_int(os.path.join(md, "raid_disks")),
        "array_state": read_text(os.path.join(md, "array_state")) or fallback.get("array_state"),
        # md/degraded exists only for redundant levels; raid0 cannot run degraded.
        "degraded_members": read_int(os.path.join(md, "degraded"))
        if os.path.exists(os.path.join(md, "degraded"))
        else fallback.get("degraded"),
        "source": "sysfs" if os.path.isdir(md) else ("/proc/mdstat" if fallback else None),
    }
    if info["array_state"] in ("broken", "inactive", "clear"):
        info["state"] = info["array_state"]
    elif info["degraded_members"]:
        info["state"] = "degraded"
    elif info["array_state"] is not None:
        info["state"] = "clean"
    else:
        info["state"] = None
    names = _slaves(disk_dir) or fallback.get("members", [])
    info["members"] = [describe_block_device(n, sys_root, proc_root, depth + 1) for n in names]
    if info["raid_disks"] is None and names:
        info["raid_disks"] = len(names)
    # One slow member caps a RAID0 stripe, so surface it at the array level.
    info["warnings"] = [
        f"{m['name']}: {m['pcie_link']['note']}"
        for m in info["members"]
        if (m.get("pcie_link") or {}).get("degraded")
    ]
    return info


def _slaves(disk_dir: str) -> list[str]:
    try:
        return sorted(os.listdir(os.path.join(disk_dir, "slaves")))
    except OSError:
        return []


def describe_block_device(
    name: str, sys_root: str = "/sys", proc_root: str = "/proc", _depth: int = 0
) -> dict[str, Any]:
    """Model, rotational, block sizes, size, PCIe link, RAID/stacking for a device name."""
    disk, partition = _resolve_name(name, sys_root)
    disk_dir = os.path.join(sys_root, "block", disk)
    rot = read_int(os.path.join(disk_dir, "queue", "rotational"))
    size_dir = os.path.join(disk_dir, partition) if partition else disk_dir
    sectors = read_int(os.path.join(size_dir, "size"))
    info: dict[str, Any] = {
        "name": disk,
        "partition": partition,
        "transport": _transport(disk),
        "model": read_text(os.path.join(disk_dir, "device", "model")),
        # virtio and many VMs report 1 whatever the host has; it is what the kernel believes.
        "rotational": None if rot is None else bool(rot),
        "logical_block_size": read_int(os.path.join(disk_dir, "queue", "logical_block_size")),
        "physical_block_size": read_int(os.path.join(disk_dir, "queue", "physical_block_size")),
        # sysfs `size` is in 512-byte sectors regardless of the logical block size.
        "size_bytes": None if sectors is None else sectors * 512,
    }
    if disk.startswith("nvme"):
        info["pcie_link"] = _pcie_link(disk_dir)
    if info["transport"] == "virtio":
        info["note"] = (
            "virtio disk: model, rotational flag and link come from the hypervisor, not the host drive"
        )
    if _depth >= _MAX_DEPTH:
        return info
    if os.path.isdir(os.path.join(disk_dir, "md")) or disk.startswith("md"):
        info["raid"] = _md_info(disk, disk_dir, sys_root, proc_root, _depth)
    elif _slaves(disk_dir):
        info["dm_name"] = read_text(os.path.join(disk_dir, "dm", "name"))
        info["members"] = [
            describe_block_device(s, sys_root, proc_root, _depth + 1) for s in _slaves(disk_dir)
        ]
    return info


def describe_path(path: str, *, sys_root: str = "/sys", proc_root: str = "/proc") -> dict:
    """Mount, filesystem and block device(s) under `path`. Never raises for missing sysfs data."""
    real = os.path.realpath(path)
    out: dict[str, Any] = {"path": real, "notes": []}
    mounts = parse_mountinfo(read_text(os.path.join(proc_root, "self", "mountinfo")) or "")
    mount = find_mount(real, mounts)
    if mount is None:
        out["notes"].append("no mount found in mountinfo; storage is unknown")
        out["device"] = None
        return out
    out.update(
        mount_point=mount["mount_point"],
        fs_type=mount["fs_type"],
        mount_source=mount["source"],
        major_minor=f"{mount['major']}:{mount['minor']}",
        bind_mount=mount["root"] != "/",
    )
    if out["bind_mount"]:
        out["notes"].append(
            f"mount shows the sub-tree {mount['root']!r} of its filesystem (a bind mount or a subvolume)"
        )
    name = None
    if mount["major"] != 0:
        name = _devnum_to_name(mount["major"], mount["minor"], sys_root)
    elif mount["source"].startswith("/dev/"):
        # btrfs and some others use an anonymous device number; the source still names it.
        candidate = os.path.basename(mount["source"])
        if os.path.isdir(os.path.join(sys_root, "block", _resolve_name(candidate, sys_root)[0])):
            name = candidate
    if name is None:
        fs = mount["fs_type"]
        reason = _NO_DEVICE_REASONS.get(fs) or (
            "FUSE filesystem" if fs.startswith("fuse") else f"{fs}: no block device found"
        )
        out["device"] = None
        out["notes"].append(reason)
        return out
    out["device"] = describe_block_device(name, sys_root, proc_root)
    return out
