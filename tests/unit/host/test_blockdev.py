"""Storage description from recorded sysfs/proc trees and from this machine."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from iobench.host.blockdev import describe_path, find_mount, parse_mountinfo
from tests.helpers.paths import DATA as TEST_DATA

DATA = TEST_DATA / "sysfs"
RAID = DATA / "raid0_4nvme"
VM = DATA / "vm_virtio"


def _describe(tree: Path, path: str) -> dict:
    return describe_path(path, sys_root=str(tree / "sys"), proc_root=str(tree / "proc"))


def test_raid0_of_four_nvme_with_a_narrow_link():
    d = _describe(RAID, "/data/imagenet/train")
    json.dumps(d)
    assert (d["mount_point"], d["fs_type"], d["major_minor"]) == ("/data", "xfs", "9:0")
    dev = d["device"]
    assert dev["name"] == "md0" and dev["rotational"] is False
    raid = dev["raid"]
    assert raid["level"] == "raid0"
    assert raid["chunk_size_bytes"] == 512 * 1024
    assert raid["state"] == "clean" and raid["raid_disks"] == 4
    members = raid["members"]
    assert [m["name"] for m in members] == ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"]
    assert all(m["model"] == "SAMSUNG MZQL27T6HBLA-00A07" for m in members)
    assert all(m["size_bytes"] == 7501476528 * 512 for m in members)
    links = {m["name"]: m["pcie_link"] for m in members}
    assert links["nvme2n1"]["degraded"] is True
    assert (links["nvme2n1"]["current_width"], links["nvme2n1"]["max_width"]) == (2, 4)
    assert "x2" in links["nvme2n1"]["note"] and "x4" in links["nvme2n1"]["note"]
    assert [n for n, link in links.items() if link["degraded"]] == ["nvme2n1"]
    assert len(raid["warnings"]) == 1 and raid["warnings"][0].startswith("nvme2n1:")


def test_mdstat_fallback_when_md_sysfs_is_missing(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(RAID, tree)
    shutil.rmtree(tree / "sys/block/md0/md")
    shutil.rmtree(tree / "sys/block/md0/slaves")
    raid = _describe(tree, "/data/x")["device"]["raid"]
    assert raid["source"] == "/proc/mdstat"
    assert raid["level"] == "raid0" and raid["chunk_size_bytes"] == 512 * 1024
    assert sorted(m["name"] for m in raid["members"]) == [f"nvme{i}n1" for i in range(4)]
    assert raid["state"] == "clean"


def test_degraded_redundant_array(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(RAID, tree)
    (tree / "sys/block/md0/md/level").write_text("raid5\n")
    (tree / "sys/block/md0/md/degraded").write_text("1\n")
    assert _describe(tree, "/data")["device"]["raid"]["state"] == "degraded"


def test_partition_bind_mount_escaped_space_and_overlay():
    part = _describe(RAID, "/mnt/old disk/file")
    assert part["mount_point"] == "/mnt/old disk"
    assert part["device"]["name"] == "sda" and part["device"]["partition"] == "sda2"
    assert part["device"]["size_bytes"] == 936652800 * 512  # the partition, not the disk

    bind = _describe(RAID, "/srv/imagenet/val")
    assert bind["bind_mount"] is True and bind["device"]["name"] == "md0"
    assert any("/datasets/imagenet" in n for n in bind["notes"])

    overlay = _describe(RAID, "/var/lib/docker/overlay2/3f1c/merged/app")
    assert overlay["device"] is None and overlay["fs_type"] == "overlay"
    assert "overlay" in overlay["notes"][0]

    assert _describe(RAID, "/dev/shm/batch")["device"] is None


def test_longest_prefix_and_last_mount_wins():
    mounts = parse_mountinfo(
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "2 1 8:2 / /data rw - ext4 /dev/sda2 rw\n"
        "3 1 8:3 / /data rw shared:4 master:2 - xfs /dev/sda3 rw\n"
        "4 1 8:4 / /dat rw - ext4 /dev/sda4 rw\n"
    )
    assert find_mount("/data/x", mounts)["source"] == "/dev/sda3"  # over-mounted
    assert find_mount("/database", mounts)["source"] == "/dev/sda1"  # not a path prefix
    assert find_mount("/dat", mounts)["source"] == "/dev/sda4"


def test_recorded_vm_tree():
    d = _describe(VM, "/work/main")
    assert d["fs_type"] == "ext4" and d["mount_point"] == "/"
    dev = d["device"]
    assert dev["name"] == "vda" and dev["transport"] == "virtio"
    assert dev["model"] is None  # virtio has no model file; that is not an error
    assert dev["logical_block_size"] == 512 and dev["size_bytes"] > 0
    assert "raid" not in dev and "pcie_link" not in dev


def test_empty_trees_never_raise(tmp_path):
    d = describe_path("/anything", sys_root=str(tmp_path), proc_root=str(tmp_path))
    assert d["device"] is None and d["notes"]
    (tmp_path / "self").mkdir()
    (tmp_path / "self/mountinfo").write_text("27 1 254:0 / / rw - ext4 /dev/vda rw\n")
    d = describe_path("/x", sys_root=str(tmp_path), proc_root=str(tmp_path))
    assert d["fs_type"] == "ext4" and d["device"] is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /sys and /proc")
def test_this_machine_does_not_raise(tmp_path):
    for path in (str(tmp_path), os.getcwd(), "/proc/self", "/"):
        d = describe_path(path)
        json.dumps(d)
        assert d["mount_point"]
        if d["device"] is not None:
            assert os.path.isdir(os.path.join("/sys/block", d["device"]["name"]))
