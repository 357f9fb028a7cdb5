"""The usable memory (the host's, capped by the memory cgroup's limit) and the OOM killer's count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from iobench.host.memory import oom_kills, usable_memory
from tests.helpers.cgroups import inside, new_group

MIB = 2**20


def _proc(tmp_path: Path, cgroup: str, mountinfo: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo + "\n")
    return proc


def _meminfo(tmp_path: Path, total_mib: int, available_mib: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(
        f"MemTotal: {total_mib * 1024} kB\nMemFree: 1 kB\nMemAvailable: {available_mib * 1024} kB\n"
    )
    return path


def test_a_v2_pod_limit_caps_total_and_available_memory(tmp_path):
    root = tmp_path / "cg2"
    pod = root / "kubepods" / "pod1"
    pod.mkdir(parents=True)
    (root / "kubepods" / "memory.max").write_text(f"{2048 * MIB}\n")  # the pod's limit: 2 GiB
    (root / "kubepods" / "memory.current").write_text(f"{1536 * MIB}\n")
    (root / "kubepods" / "memory.stat").write_text(f"anon 1\ninactive_file {512 * MIB}\nactive_file 9\n")
    (pod / "memory.max").write_text("max\n")
    (pod / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 3\noom_kill 2\n")
    proc = _proc(tmp_path, "0::/kubepods/pod1\n", f"30 1 0:26 / {root} rw - cgroup2 cgroup2 rw")
    memory = usable_memory(proc, _meminfo(tmp_path, 65536, 60000))
    assert memory.total == memory.limit == 2048 * MIB and memory.host_total == 65536 * MIB
    assert memory.available == (2048 - (1536 - 512)) * MIB  # inactive file pages can be reclaimed
    assert (
        "memory cgroup limit of 2.00 GiB" in memory.describe()
        and "the host has 64.0 GiB" in memory.describe()
    )
    assert oom_kills(proc) == (2, f"in this memory cgroup ({pod})")


def test_a_v1_group_without_a_limit_leaves_the_host_and_counts_its_kills(tmp_path):
    point = tmp_path / "memory"
    point.mkdir()
    (point / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    (point / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    proc = _proc(
        tmp_path,
        "4:memory:/docker/abc\n1:cpu:/\n",
        f"40 31 0:29 /docker/abc {point} rw - cgroup cgroup rw,memory",
    )
    memory = usable_memory(proc, _meminfo(tmp_path, 4096, 3000))
    assert (memory.total, memory.available, memory.limit) == (4096 * MIB, 3000 * MIB, None)
    assert oom_kills(proc) == (5, f"in this memory cgroup ({point})")


def test_a_v1_limit_on_a_parent_group_counts_the_children_page_cache_as_reclaimable(tmp_path):
    """Slurm on v1: the job's limit on job_1, the process in job_1/step_0. usage_in_bytes includes
    the children; only total_inactive_file does too (inactive_file is the group's own)."""
    point = tmp_path / "memory"
    step = point / "job_1" / "step_0"
    step.mkdir(parents=True)
    (point / "job_1" / "memory.limit_in_bytes").write_text(f"{1024 * MIB}\n")
    (point / "job_1" / "memory.usage_in_bytes").write_text(f"{900 * MIB}\n")
    (point / "job_1" / "memory.stat").write_text(f"inactive_file 0\ntotal_inactive_file {800 * MIB}\n")
    proc = _proc(tmp_path, "4:memory:/job_1/step_0\n", f"40 31 0:29 / {point} rw - cgroup cgroup rw,memory")
    memory = usable_memory(proc, _meminfo(tmp_path, 65536, 60000))
    assert memory.limit == 1024 * MIB and memory.available == (1024 - 100) * MIB


def test_a_group_beside_the_mounts_root_is_not_taken_for_one_under_it(tmp_path):
    """A mount showing /docker/abc; a process in /docker/abc2 (not under it) reads the mount's root,
    not ../abc2 outside the mount."""
    point = tmp_path / "memory"
    point.mkdir()
    (point / "memory.limit_in_bytes").write_text(f"{512 * MIB}\n")
    proc = _proc(
        tmp_path, "4:memory:/docker/abc2\n", f"40 31 0:29 /docker/abc {point} rw - cgroup cgroup rw,memory"
    )
    assert usable_memory(proc, _meminfo(tmp_path, 4096, 3000)).limit == 512 * MIB


def test_with_no_cgroup_to_read_the_host_counts(tmp_path):
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("nr_free_pages 1\noom_kill 11\n")
    assert oom_kills(tmp_path / "no-proc", vmstat) == (11, "on this host (/proc/vmstat)")
    assert oom_kills(tmp_path / "no-proc", tmp_path / "none") is None
    assert usable_memory(tmp_path / "no-proc", _meminfo(tmp_path, 1024, 512)).limit is None


_SEE_AND_GROW = """
import sys
from iobench.host.memory import oom_kills, usable_memory
print(usable_memory().limit, oom_kills()[0], flush=True)
if sys.argv[1] == "grow":
    hog = bytearray(400 * 2**20)  # over the limit: the OOM killer's
"""


def test_a_process_in_a_memory_limited_cgroup_sees_the_limit_and_the_oom_killer_counts():
    """A real cgroup of this host at 300 MiB, as docker --memory=300m makes: the limit is seen, and
    a process that grows past it is killed (SIGKILL) and counted where oom_kills() looks."""
    limit = 300 * MIB
    with new_group(
        "memory", v1={"memory.limit_in_bytes": str(limit)}, v2={"memory.max": str(limit)}
    ) as group:
        see = subprocess.run(
            inside(group, [sys.executable, "-c", _SEE_AND_GROW, "see"]),
            capture_output=True,
            text=True,
            check=True,
        )
        seen, before = map(int, see.stdout.split())
        grow = subprocess.run(
            inside(group, [sys.executable, "-c", _SEE_AND_GROW, "grow"]), capture_output=True, text=True
        )
        after = subprocess.run(
            inside(group, [sys.executable, "-c", _SEE_AND_GROW, "see"]),
            capture_output=True,
            text=True,
            check=True,
        )
    print(
        f"figures: limit seen {seen / MIB:.0f} MiB; a 400 MiB process: exit {grow.returncode}; OOM kills {before} -> {after.stdout.split()[1]}"
    )
    assert seen == limit
    assert grow.returncode == -9  # the kernel's SIGKILL: no traceback, nothing printed
    assert int(after.stdout.split()[1]) == before + 1
