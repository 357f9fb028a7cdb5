"""The lab's daemons killed under a running sweep: each fault surfaces within the tier's deadline
(+ 10 s), as a short error with the likely cause, the traceback in the cell's log; nothing is lost
(results.parquet reads, no partial cache entry) and `--resume` finishes the sweep once the fault
is mended (integration, against a real bluestore lab: an OSD killed with kill -9 loses nothing).

Each test runs a real `iobench sweep` (CLI, cell processes, DataLoader workers) over one tier with
``deadline_s: 5``, waits until the cell is in its step loop (its live figures show 3 steps), injects
the fault, and times the fault -> the cell's failed summary on disk. The emulated accelerator (80
samples/s, batches of 16) paces the loader, so the tier is still being read when the fault lands.
The figures of one run are in docs/reliability.md ("Daemons killed").
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from iobench.lab.conf import MON, OSD, RGW
from iobench.tiers.ramcache import ram_cache_path
from tests.helpers.faultkit import cache_problems, kill9
from tests.helpers.lab_fixture import ceph_missing, cephfs_installed, mend
from tests.helpers.sweepkit import (  # STALL: run.stall_timeout, well above the deadline
    STALL,
    assert_resumes,
    assert_table,
    env_of,
    failed,
    running,
    s3_tier,
    stepping,
    sweep_file,
)

DEADLINE = 5  # the tiers' deadline_s in these tests (the default is 30)
SLACK = 10  # the bound: time to a clear error <= deadline + 10 s


# ------------------------------------------------------------------ a sweep to break


def _assert_clear_failure(out: Path, cell_id: str, summary: dict, *, hint: str) -> None:
    """Two lines (cause; hint naming the likely cause), no traceback; the traceback in cell.log."""
    error = summary["error"]
    lines = error.splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint: "), error
    assert "Traceback" not in error and 'File "' not in error, error
    assert hint in lines[1], error
    log = (out / cell_id / "cell.log").read_text()
    assert "Traceback (most recent call last)" in log or "watchdog" in log, log[-2000:]


def _figure(
    fault: str, took: float, summary: dict, extra: str = "", limit: str = f"deadline {DEADLINE} s"
) -> None:
    print(f"figures: {fault}: clear error after {took:.1f} s ({limit}){extra}; error: {summary['error']}")


@dataclass(frozen=True)
class _Faulted:
    """A sweep whose running cell met a fault: the cell, its failed summary, the seconds from the
    fault to that summary, and the sweep's exit code and output once it ended."""

    cell_id: str
    summary: dict
    took: float
    returncode: int
    output: str


def _fault_mid_cell(iobench_sweep, sweep: Path, out: Path, env: dict, fault: Callable[[], float]) -> _Faulted:
    """Run ``sweep`` into ``out``; once its cell is in its step loop, ``fault()`` (it returns when it
    struck, monotonic); then wait for the cell's failed summary and for the sweep to end."""
    proc = iobench_sweep.start(sweep, "--out", out, env=env)
    cell_id = stepping(out, proc)
    t_fault = fault()
    summary, t_error = failed(out, cell_id, proc)
    output, _ = proc.communicate(timeout=120)
    return _Faulted(cell_id, summary, t_error - t_fault, proc.returncode, output)


# ------------------------------------------------------------------ the OSD


def _tier(kind: str, lab, tmp_path: Path) -> dict:
    tag = uuid.uuid4().hex[:8]
    if kind == "s3-cache":
        return {
            "kind": "s3",
            "name": f"s3-nvme-{tag}",
            "url": f"s3://osd-{tag}/tiny",
            "cache_dir": str(tmp_path / "cache"),
            "cache_size": "1GB",
            "upload": True,
            "deadline_s": DEADLINE,
        }
    if kind == "rados-ram":
        return {
            "kind": "rados",
            "name": f"rados-ram-{tag}",
            "url": f"rados://osd-{tag}/tiny",
            "memory_cache": "256MB",
            "upload": True,
            "deadline_s": DEADLINE,
        }
    if lab.mount is None:
        if not cephfs_installed():
            ceph_missing("CephFS is not installed: apt-get install ceph-mds ceph-fuse")
        meta = json.loads((Path(lab.dir) / "lab.json").read_text())
        pytest.skip(f"CephFS is up but not mounted here: {meta['mount_note']}")
    return {
        "kind": "cephfs",
        "name": f"cephfs-{tag}",
        "path": str(Path(lab.mount) / f"osd-{tag}"),
        "upload": True,
        "deadline_s": DEADLINE,
    }


@pytest.mark.parametrize("kind", ["s3-cache", "rados-ram", "cephfs"])
def test_an_osd_killed_mid_cell_fails_it_within_the_deadline_and_resume_finishes(
    lab_to_break, iobench_sweep, tiny_dataset, tmp_path, kind
):
    lab, env = lab_to_break, env_of(lab_to_break)
    tier = _tier(kind, lab, tmp_path)
    out = tmp_path / "run"
    run = _fault_mid_cell(
        iobench_sweep, sweep_file(tmp_path, tiny_dataset, tier), out, env, lambda: kill9(lab, OSD)[1]
    )
    cell_id, summary = run.cell_id, run.summary
    assert run.returncode == 1, run.output
    _figure(f"osd.0 kill -9 mid-cell ({kind})", run.took, summary)
    assert run.took <= DEADLINE + SLACK
    _assert_clear_failure(out, cell_id, summary, hint="the storage stopped answering")
    assert "not a credentials or staging problem" in summary["error"]
    assert_table(out, {cell_id: "failed"})
    if kind == "s3-cache":  # only whole shards in the cache, no temp file, no lock held
        from iobench.datasets.manifest import Manifest

        manifest = Manifest.load(tiny_dataset)
        sha = {f"{tier['url']}/{s.name}": s.sha256 for s in manifest.shards}
        assert cache_problems(tmp_path / "cache", sha) == []
    ram = ram_cache_path(tier["name"])
    assert not os.path.exists(ram), f"the RAM cache {ram} outlived its sweep"

    mend(lab)
    again = assert_resumes(iobench_sweep, out, env, [cell_id])
    assert not os.path.exists(ram)
    print(f"figures: osd.0 ({kind}): mended, --resume finished the sweep in {again:.1f} s")


# ------------------------------------------------------------------ radosgw and the mon


def test_radosgw_killed_mid_cell_is_a_refused_endpoint_not_a_timeout(
    lab_to_break, iobench_sweep, tiny_dataset, tmp_path
):
    """radosgw killed for good: the store had answered, so its refusals are ridden through until the
    deadline (a restart would have been: test_gateway_restart.py); then the cell fails as a refused
    endpoint, not a timeout."""
    lab, env = lab_to_break, env_of(lab_to_break)
    out = tmp_path / "run"
    sweep = sweep_file(tmp_path, tiny_dataset, s3_tier("rgw", DEADLINE))
    run = _fault_mid_cell(iobench_sweep, sweep, out, env, lambda: kill9(lab, RGW)[1])
    cell_id, summary = run.cell_id, run.summary
    _figure("radosgw kill -9 mid-cell (S3, streamed)", run.took, summary)
    assert run.took <= DEADLINE + SLACK
    _assert_clear_failure(out, cell_id, summary, hint="nothing answers at the endpoint")
    assert "then refused or reset connections until the 5 s deadline" in summary["error"]
    assert_table(out, {cell_id: "failed"})
    mend(lab)
    assert_resumes(iobench_sweep, out, env, [cell_id])


def test_the_mon_killed_mid_sweep_fails_the_next_cell_at_connect(
    lab_to_break, iobench_sweep, tiny_dataset, tmp_path
):
    """Reads need no mon (a client has the maps): the running cell finishes. The next cell cannot
    connect (librados waits client_mount_timeout = min(15 s, deadline)) and fails within the deadline."""
    lab, env = lab_to_break, env_of(lab_to_break)
    tag = uuid.uuid4().hex[:8]
    tier = {
        "kind": "rados",
        "name": f"rados-{tag}",
        "url": f"rados://mon-{tag}/tiny",
        "upload": True,
        "deadline_s": DEADLINE,
    }
    out = tmp_path / "run"
    proc = iobench_sweep.start(
        sweep_file(tmp_path, tiny_dataset, tier, workers=(0, 1)), "--out", out, env=env
    )
    first = stepping(out, proc)
    _, t_fault = kill9(lab, MON)
    ids = [c["cell_id"] for c in json.loads((out / "cells.json").read_text())]
    second = ids[1]
    while running(out) != second:  # the first cell ends (ok: reads need no mon) and the next starts
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    t_start = time.monotonic()
    summary, t_error = failed(out, second, proc)
    took = t_error - t_start
    proc.communicate(timeout=120)
    first_status = json.loads((out / first / "summary.json").read_text())["status"]
    _figure(
        "mon kill -9 mid-sweep (RADOS)",
        took,
        summary,
        f" from the start of the next cell ({t_start - t_fault:.1f} s after the kill; the running cell: {first_status})",
    )
    assert first_status == "ok"  # it had its maps and connection: the mon's death cost it nothing
    assert took <= DEADLINE + SLACK
    _assert_clear_failure(out, second, summary, hint="the storage stopped answering")
    assert_table(out, {first: "ok", second: "failed"})
    mend(lab)
    assert_resumes(iobench_sweep, out, env, ids)


# ------------------------------------------------------------------ an endpoint that never answers


class Valve:
    """A TCP port in front of radosgw that passes bytes both ways, or, shut, accepts connections and
    answers nothing (requests held, never forwarded): the endpoint that accepts and never answers."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.shut = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._socks: list[socket.socket] = []
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 16):
                while self.shut.is_set() and not self._stop:  # hold it: the client hears nothing
                    time.sleep(0.05)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop = True
        self.server.close()
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()


@pytest.mark.parametrize("guard", ["deadline", "watchdog"])
def test_an_endpoint_that_accepts_and_never_answers(
    lab_to_break, iobench_sweep, tiny_dataset, tmp_path, guard
):
    """``deadline``: the tier's deadline (5 s) ends each request. ``watchdog``: with a deadline too
    long to help (60 s), the sweep's watchdog fails the cell after run.stall_timeout (8 s) without a
    batch, naming the tier, the endpoint, the last batch and when it came."""
    lab, env = lab_to_break, env_of(lab_to_break)
    valve = Valve(("127.0.0.1", lab.ports["s3"]))
    try:
        tag = uuid.uuid4().hex[:8]
        tier = {
            "kind": "s3",
            "name": f"hang-{tag}",
            "url": f"s3://hang-{tag}/tiny",
            "endpoint_url": valve.endpoint,
            "cache_dir": str(tmp_path / "cache"),
            "upload": True,
            "deadline_s": DEADLINE if guard == "deadline" else 60,
        }
        limit = DEADLINE if guard == "deadline" else 8
        out = tmp_path / "run"
        sweep = sweep_file(tmp_path, tiny_dataset, tier, stall=STALL if guard == "deadline" else 8)

        def shut() -> float:
            valve.shut.set()
            return time.monotonic()

        run = _fault_mid_cell(iobench_sweep, sweep, out, env, shut)
        cell_id, summary = run.cell_id, run.summary
        _figure(
            f"an endpoint that accepts and never answers ({guard})",
            run.took,
            summary,
            limit=f"deadline {DEADLINE} s" if guard == "deadline" else "run.stall_timeout 8 s, deadline 60 s",
        )
        assert run.took <= limit + SLACK
        if guard == "deadline":
            _assert_clear_failure(out, cell_id, summary, hint="the storage stopped answering")
            assert "no answer within the 5 s deadline" in summary["error"]
        else:
            _assert_clear_failure(out, cell_id, summary, hint="the storage stopped delivering")
            first = summary["error"].splitlines()[0]
            assert (
                first.startswith("stalled: no batch for") and valve.endpoint in first and tier["url"] in first
            )
            assert "run.stall_timeout=8 s" in first and "UTC" in first
            assert "watchdog" in (out / cell_id / "cell.log").read_text()
        assert_table(out, {cell_id: "failed"})
        from iobench.datasets.manifest import Manifest

        sha = {f"{tier['url']}/{s.name}": s.sha256 for s in Manifest.load(tiny_dataset).shards}
        assert cache_problems(tmp_path / "cache", sha) == []  # the killed download's temp was removed
        valve.shut.clear()
        assert_resumes(iobench_sweep, out, env, [cell_id])
    finally:
        valve.close()
