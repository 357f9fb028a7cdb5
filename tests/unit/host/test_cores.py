"""The usable CPUs: affinity capped by the cgroup's CPU quota (docker --cpus, Kubernetes limits)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from iobench.host.cores import cpu_quota, usable_cores
from tests.helpers.cgroups import inside, new_group


def _proc(tmp_path: Path, cgroup: str, mountinfo: list[str]) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("\n".join(mountinfo) + "\n")
    return proc


def test_a_v2_quota_anywhere_up_the_path_binds_the_smallest(tmp_path):
    root = tmp_path / "cg2"
    (root / "kubepods" / "pod1").mkdir(parents=True)
    (root / "cpu.max").write_text("max 100000\n")
    (root / "kubepods" / "cpu.max").write_text("400000 100000\n")  # the pod's limit: 4 CPUs
    (root / "kubepods" / "pod1" / "cpu.max").write_text("max 100000\n")
    proc = _proc(tmp_path, "0::/kubepods/pod1\n", [f"30 1 0:26 / {root} rw - cgroup2 cgroup2 rw"])
    assert cpu_quota(proc) == 4.0
    (root / "kubepods" / "pod1" / "cpu.max").write_text("150000 100000\n")
    assert cpu_quota(proc) == 1.5
    assert usable_cores(proc) == 1  # rounded down: 1.5 CPUs do not run two decoders at full speed


def test_a_v1_quota_under_a_mount_that_shows_part_of_the_hierarchy(tmp_path):
    point = tmp_path / "cpu"  # a container's view: the mount's root is its own group
    point.mkdir()
    (point / "cpu.cfs_quota_us").write_text("200000\n")
    (point / "cpu.cfs_period_us").write_text("100000\n")
    proc = _proc(
        tmp_path,
        "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
        [f"40 31 0:29 /docker/abc {point} ro - cgroup cgroup rw,cpu,cpuacct"],
    )
    assert cpu_quota(proc) == 2.0
    (point / "cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(proc) is None


def test_no_quota_or_nothing_to_read_leaves_the_affinity(tmp_path):
    assert cpu_quota(tmp_path / "no-proc") is None
    assert usable_cores(tmp_path / "no-proc") == len(os.sched_getaffinity(0))


def test_a_process_in_a_cgroup_with_a_quota_of_one_and_a_half_cpus_counts_one():
    """A real cgroup of this host (v1 cpu controller or v2 cpu.max), as docker --cpus=1.5 makes."""
    v1 = {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "150000"}
    with new_group("cpu", v1=v1, v2={"cpu.max": "150000 100000"}) as group:
        code = "from iobench.host.cores import cpu_quota, usable_cores; print(cpu_quota(), usable_cores())"
        out = subprocess.run(
            inside(group, [sys.executable, "-c", code]), capture_output=True, text=True, check=True
        ).stdout.split()
        assert out == ["1.5", "1"]
