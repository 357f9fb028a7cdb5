"""A sweep survives being stopped: killed (SIGKILL) or stopped (SIGTERM) in the middle of a cell,
it loses at most that cell, leaves no process behind, and `--resume` finishes it without running
the finished cells again. Real sweeps, real cell processes, the real local tier."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
import yaml
from rich.console import Console

from iobench.results.summary import CellSummary
from iobench.sweep.config import parse_config
from iobench.sweep.estimate import CellEstimate
from iobench.sweep.overrides import apply_overrides
from iobench.sweep.progress import SweepProgress
from iobench.sweep.rundir import RunDirError, SweepState, hold
from iobench.sweep.runner import Sweep
from iobench.sweep.supervise import OOM_SCORE_ADJ
from tests.helpers.processes import Sweeps

CELL_FILES = {"summary.json", "manifest.json", "steps.parquet", "telemetry.parquet"}
RUN_FILES = {"results.parquet", "sweep.yaml", "cells.json", "sweep-state.json"}


def _config(tmp_path: Path, dataset: Path) -> Path:
    # a custom accelerator at 80 samples/s holds each batch of 16 for >= 100 ms, so every cell
    # spends a second or so in its step loop whatever the CPU: time enough to be caught there
    cfg = {
        "dataset": {"path": str(dataset)},
        "tiers": [{"kind": "local", "name": "disk"}],
        "loaders": [{"kind": "torch", "workers": [0, 1], "batch_size": [16], "shuffle_buffer": 64}],
        "accelerators": [{"kind": "emulated", "type": "custom", "samples_per_s": 80, "count": [1, 2]}],
        "run": {"warmup_steps": 2, "max_steps": 8},
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _catch_running(out: Path, proc: subprocess.Popen, min_index: int) -> str:
    """The id of the cell at position >= min_index once it is inside its step loop (its live file
    exists); fails if the sweep ends first."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the sweep ended before cell {min_index + 1} ran:\n{proc.stdout.read()}"
        try:
            ids = [c["cell_id"] for c in json.loads((out / "cells.json").read_text())]
            running = json.loads((out / "sweep-state.json").read_text())["running"]
        except (OSError, ValueError, TypeError):
            running = None
        live = out / f".attempt-{running['cell_id']}" / "live.json" if running else None
        if running and ids.index(running["cell_id"]) >= min_index and live.exists():
            return running["cell_id"]
        time.sleep(0.05)
    raise AssertionError("no cell was caught running")


def _processes_of(out: Path) -> list[str]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if str(out) in cmdline:
            found.append(f"{p.pid}: {cmdline}")
    return found


def _oom_score_adj(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/oom_score_adj").read_text())
    except OSError:  # gone since it was listed
        return None


def _no_processes_left(out: Path) -> None:
    deadline = time.monotonic() + 15
    while _processes_of(out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_of(out), "orphans of the sweep"


def _assert_clean(out: Path, cell_ids: list[str]) -> None:
    """Every planned cell complete, nothing half-written."""
    assert {p.name for p in out.iterdir()} == RUN_FILES | set(cell_ids)
    for cell_id in cell_ids:
        assert {p.name for p in (out / cell_id).iterdir()} == CELL_FILES, cell_id


def _start_or_resume(sweeps: Sweeps, config: Path, out: Path) -> subprocess.Popen:
    """What a user does after a kill: --resume once the plan is saved, else start again."""
    if not (out / "cells.json").exists():
        return sweeps.start(config, "--out", out)
    return sweeps.start("--resume", "--out", out)


def _finished(out: Path) -> dict[str, tuple[int, str]]:
    """Cells with an ok result now: (summary mtime, started_at), to show they are never run again."""
    done = {}
    for path in out.glob("*/summary.json"):
        if path.parent.name.startswith("."):  # a cell's files staged, not yet published
            continue
        summary = json.loads(path.read_text())
        if summary["status"] == "ok":
            done[path.parent.name] = (path.stat().st_mtime_ns, summary["started_at"])
    return done


def _assert_whole_at_rest(out: Path) -> None:
    """Right after a SIGKILL: every published cell is a complete result or the record of an
    interrupted attempt, and the results table reads. (Killed early enough, there is no run dir.)"""
    for cell in out.iterdir() if out.exists() else ():
        if cell.is_dir() and not cell.name.startswith("."):
            files = {p.name for p in cell.iterdir()}
            status = json.loads((cell / "summary.json").read_text())["status"]
            assert files == (CELL_FILES if status == "ok" else {"summary.json"}), (cell.name, status)
    if (out / "results.parquet").exists():
        pq.read_table(out / "results.parquet")


KILL_SEED = 1


def test_a_sweep_killed_at_random_points_resumes_to_every_cell_exactly_once(
    iobench_sweep, tmp_path, tiny_dataset
):
    """SIGKILL at seeded random moments (start-up, inside a cell, between cells), resume after each:
    each kill loses at most the running cell, finished cells are never run again, and in the end
    every cell has exactly one ok result."""
    config, out = _config(tmp_path, tiny_dataset), tmp_path / "run"
    rng = random.Random(KILL_SEED)
    kills = []
    proc = iobench_sweep.start(config, "--out", out)
    for _ in range(3):
        at = rng.uniform(0.3, 14.0)  # a cell takes ~5 s here, start-up ~1.5 s
        try:
            proc.wait(at)
            break  # it finished first
        except subprocess.TimeoutExpired:
            pass
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        output = proc.stdout.read()
        proc.stdout.close()
        _no_processes_left(out)  # the cell died with the sweep, loader workers included
        _assert_whole_at_rest(out)
        try:
            running = json.loads((out / "sweep-state.json").read_text())["running"]
        except OSError:
            running = None  # killed before the state was first written
        kills.append(
            {
                "at_s": round(at, 2),
                "running": running and running["cell_id"],
                "attempt": running and (running["cell_id"], running["started_at"]),
                "done": _finished(out),
            }
        )
        proc = _start_or_resume(iobench_sweep, config, out)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    assert kills  # where each one landed depends on the machine's speed; the outcome may not
    if kills[-1]["running"] and kills[-1]["running"] not in kills[-1]["done"]:
        assert f"{kills[-1]['running']} was running when the last sweep died" in output
    ids = [c["cell_id"] for c in json.loads((out / "cells.json").read_text())]
    assert (
        f"resuming: {len(kills[-1]['done'])} cell(s) done and kept, {len(ids) - len(kills[-1]['done'])} to run"
        in output
    )

    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [r["cell_id"] for r in rows] == ids and all(r["status"] == "ok" for r in rows)
    _assert_clean(out, ids)
    final = _finished(out)
    for kill in kills:  # a cell finished before a kill was not run again after it
        assert {cell_id: final[cell_id] for cell_id in kill["done"]} == kill["done"]
    attempts = json.loads((out / "sweep-state.json").read_text())["attempts"]
    assert sorted(a["cell_id"] for a in attempts if a["status"] == "ok") == sorted(ids)  # exactly once
    assert {a["status"] for a in attempts} <= {"ok", "interrupted"}
    # each attempt a kill cut short is on record as interrupted (a resume killed before it settled the
    # last one finds the same attempt still running: counted once)
    cut_short = {k["attempt"] for k in kills if k["attempt"] and k["running"] not in k["done"]}
    assert sorted(
        (a["cell_id"], a["started_at"]) for a in attempts if a["status"] == "interrupted"
    ) == sorted(cut_short)
    for cell_id in ids:  # and each result is the one of its ok attempt (the cell's clock has seconds)
        [ok] = [a for a in attempts if a["cell_id"] == cell_id and a["status"] == "ok"]
        started = dt.datetime.fromisoformat(
            json.loads((out / cell_id / "summary.json").read_text())["started_at"]
        )
        attempt = [dt.datetime.fromisoformat(ok[k]) for k in ("started_at", "finished_at")]
        assert attempt[0] - dt.timedelta(seconds=1) <= started <= attempt[1], (cell_id, started, ok)
    assert not _processes_of(out)

    # and the plan, asked again, has nothing left to do
    plan = iobench_sweep.run("sweep", "--dry-run", "--resume", "--out", out)
    assert plan.returncode == 0 and f"{len(ids)} cell(s) done and skipped, 0 to run" in plan.stdout
    print(
        f"figures: sweep SIGKILL at {[k['at_s'] for k in kills]} s, the cell running then: "
        f"{[k['running'] for k in kills]}, cells done before each: {[len(k['done']) for k in kills]}; "
        f"{len(ids)} of {len(ids)} cells ok exactly once, 0 run twice, 0 lost"
    )


def test_a_kill_after_a_cell_landed_but_before_the_table_was_rewritten_loses_no_row(
    iobench_sweep, tmp_path, tiny_dataset
):
    """The window the random kills above found (seed 1, once the loader got faster): the last cell's
    summary is published, sweep-state still names it as running, results.parquet lacks its row.
    Resuming has no cell left to run and must still put the row back."""
    config, out = _config(tmp_path, tiny_dataset), tmp_path / "run"
    first = iobench_sweep.run(
        "sweep", config, "--out", out, "--set", "loader.workers=[0]", "--set", "accelerator.count=[1]"
    )
    assert first.returncode == 0, first.stdout + first.stderr
    (cell_id,) = [c["cell_id"] for c in json.loads((out / "cells.json").read_text())]
    SweepState(out).start(cell_id)  # as if killed between publishing the cell and clearing this
    summary = out / cell_id / "summary.json"
    # published after the entry was written, as in that window (a second on: the file system's
    # clock is coarser than time.time(), so "now" may stamp it before the entry's own time)
    later = json.loads((out / "sweep-state.json").read_text())["running"]["t"] + 1
    os.utime(summary, (later, later))
    empty = pq.read_table(out / "results.parquet").slice(0, 0)
    pq.write_table(empty, out / "results.parquet")

    resumed = iobench_sweep.run("sweep", "--resume", "--out", out)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "1 cell(s) done and kept, 0 to run" in resumed.stdout
    rows = pq.read_table(out / "results.parquet").to_pylist()
    assert [(r["cell_id"], r["status"]) for r in rows] == [(cell_id, "ok")]
    state = json.loads((out / "sweep-state.json").read_text())
    assert state["running"] is None and state["attempts"][-1]["status"] == "ok"


def test_sigterm_records_the_running_cell_and_a_changed_plan_is_refused(
    iobench_sweep, tmp_path, tiny_dataset
):
    config, out = _config(tmp_path, tiny_dataset), tmp_path / "run"
    proc = iobench_sweep.start(config, "--out", out)
    stopped = _catch_running(out, proc, min_index=1)
    # memory run out: the kernel's OOM killer takes the cell (its workers) first, not the sweep
    adjust = {p.pid: _oom_score_adj(p.pid) for p in psutil.Process(proc.pid).children(recursive=True)}
    assert adjust and set(adjust.values()) - {None} == {OOM_SCORE_ADJ}
    assert _oom_score_adj(proc.pid) == _oom_score_adj(os.getpid())
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert f"{stopped} recorded as interrupted" in output and "--resume --out" in output
    _no_processes_left(out)

    rows = {r["cell_id"]: r for r in pq.read_table(out / "results.parquet").to_pylist()}
    assert rows[stopped]["status"] == "interrupted"
    assert [r["status"] for r in rows.values()] == ["ok"] * (len(rows) - 1) + ["interrupted"]
    summary = json.loads((out / stopped / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["started_at"] and "SIGTERM" in summary["error"]
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no scratch or temporaries
    assert json.loads((out / "sweep-state.json").read_text())["running"] is None

    changed = iobench_sweep.run("sweep", config, "--resume", "--out", out, "--set", "run.max_steps=9")
    assert changed.returncode == 2
    assert "differs" in changed.stderr and "changed" in changed.stderr and "--force" in changed.stderr
    again = iobench_sweep.run("sweep", config, "--out", out)
    assert again.returncode == 2 and "--resume continues it" in " ".join(again.stderr.split())

    # more accelerator counts leave the cells run so far as they were: --force keeps their results
    wider = apply_overrides(yaml.safe_load(config.read_text()), ["accelerator.count=[1, 2, 4]"])
    plan = iobench_sweep.run(
        "sweep", config, "--dry-run", "--resume", "--out", out, "--set", "accelerator.count=[1,2,4]"
    )
    assert "2 new" in plan.stdout and "--resume would refuse without --force" in " ".join(plan.stdout.split())
    with hold(out), pytest.raises(RunDirError, match="another iobench sweep"):
        Sweep(parse_config(wider), out, resume=True, force=True).__enter__()
    with Sweep(parse_config(wider), out, resume=True, force=True) as sweep:
        finished = [cell_id for cell_id, row in rows.items() if row["status"] == "ok"]
        assert sweep.resumed.done == set(finished) and sweep.resumed.replanned[0].startswith("2 new")
        assert len(sweep.todo()) == 6 - len(finished)


def test_the_eta_starts_from_the_estimate_and_learns_from_finished_cells():
    cfg = parse_config(
        {
            "dataset": {"path": "/data/in1k-shards"},
            "tiers": [{"kind": "local"}],
            "loaders": [{"workers": [0, 1, 2]}],
            "accelerators": [{"type": "h100"}],
        }
    )
    cells = cfg.cells()
    estimates = {c.cell_id: CellEstimate(100, 10.0, 10.0) for c in cells}
    console = Console(file=io.StringIO())
    progress = SweepProgress(console, cells, estimates, {cells[0].cell_id}, "off")
    assert progress.eta_s() == (20.0, True)  # the first cell is done already
    progress.cell_start(1, cells[1])
    progress.live(cells[1], None, 4.0)
    assert progress.eta_s() == (16.0, True)  # the running cell has 6 s of its 10 left
    progress.cell_done(1, cells[1], CellSummary.failed(cells[1], "x"), 20.0)
    assert progress.eta_s() == (20.0, True)  # cells take twice the estimate here
