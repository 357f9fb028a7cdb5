"""No RAM left behind: a RAM shard cache in /dev/shm (a tier's memory_cache) goes with the sweep
that made it, is kept only on request (its path printed), and one left by a sweep that was killed
is found, removed and reported by the next sweep (integration: real sweeps on the session lab)."""

from __future__ import annotations

import json
import os
import shutil
import uuid

from iobench.tiers.cachebooks import settle_ram_leftovers
from iobench.tiers.ramcache import OWNER_FILE, ram_cache_path
from tests.helpers.sweepkit import assert_table, env_of, stepping, sweep_file


def _tier(ceph_lab, **extra) -> dict:
    tag = uuid.uuid4().hex[:8]
    return {
        "kind": "rados",
        "name": f"ram-{tag}",
        "url": f"rados://ram-{tag}/tiny",
        "conffile": str(ceph_lab.conf),
        "memory_cache": "128MB",
        "upload": True,
        **extra,
    }


def test_a_killed_sweeps_ram_cache_is_found_and_removed_by_the_next(
    ceph_lab, iobench_sweep, tiny_dataset, tmp_path
):
    env = env_of(ceph_lab)
    tier = _tier(ceph_lab)
    ram = ram_cache_path(tier["name"])
    out = tmp_path / "run"
    proc = iobench_sweep.start(sweep_file(tmp_path, tiny_dataset, tier), "--out", out, env=env)
    try:
        cell_id = stepping(out, proc)
        with open(os.path.join(ram, OWNER_FILE)) as f:
            owner = json.load(f)
        assert owner["sweep_pid"] == proc.pid and owner["run_dir"] == str(out) and owner["keep"] is False
        assert any(n.endswith(".tar") for n in os.listdir(ram))  # the cache is in use
        proc.kill()  # SIGKILL: the sweep cannot clean up; its cell dies with it
        proc.wait(30)
        left = sum(os.path.getsize(os.path.join(ram, n)) for n in os.listdir(ram) if n.endswith(".tar"))
        assert left > 0, "nothing was left in RAM: the test shows nothing"

        resumed = iobench_sweep.resume(out, env)
        assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        said = " ".join(resumed.stdout.split())
        assert "removed a RAM cache left by a sweep that did not finish" in said and ram in said, said
        assert f"sweep pid {proc.pid}" in said
        assert f"removed the RAM cache {ram}" in said  # and its own, at its end
        assert not os.path.exists(ram)
        assert_table(out, {cell_id: "ok"})
        print(
            f"figures: a SIGKILLed sweep left {left / 1e6:.1f} MB in {ram}; the next sweep removed it and said so"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        shutil.rmtree(ram, ignore_errors=True)


def test_a_ram_cache_kept_on_request_is_kept_and_named(ceph_lab, iobench_sweep, tiny_dataset, tmp_path):
    env = env_of(ceph_lab)
    tier = _tier(ceph_lab, keep_memory_cache=True)
    ram = ram_cache_path(tier["name"])
    try:
        out = tmp_path / "run"
        proc = iobench_sweep.start(sweep_file(tmp_path, tiny_dataset, tier), "--out", out, env=env)
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output[-3000:]
        said = " ".join(output.split())
        assert f"kept the RAM cache {ram}" in said and f"rm -r {ram}" in said, said
        assert os.path.isdir(ram) and any(n.endswith(".tar") for n in os.listdir(ram))
        # the next sweep reports it (it holds RAM) and leaves it
        notes = settle_ram_leftovers()
        assert any("kept on request" in n and ram in n for n in notes), notes
        assert os.path.isdir(ram)
    finally:
        shutil.rmtree(ram, ignore_errors=True)
