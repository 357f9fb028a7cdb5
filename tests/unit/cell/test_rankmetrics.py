"""A multi-rank cell's figures (analysis/job.py, as a probed job's), without processes: the steps every rank of a
synchronous job completed, the time each rank spent waiting for its data, for its peers and in the
all-reduce, and what peers cost; ranks into one result, rank counts in the plan, a node's place and
torchrun's command line, the first failure as the cause (the cells themselves run under torchrun
in tests/integration/test_distributed.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from iobench.analysis.job import RankInput, aggregate, common_interval
from iobench.cell.entry.rankmetrics import RankRun, merged_log
from iobench.cell.protocol import cell_command
from iobench.cell.ranks.distributed import first_rank_error
from iobench.cell.records import StepLog
from iobench.results.figures import StepRow, Verdict
from iobench.results.spec import RunSettings
from iobench.sweep.cli import node_place
from iobench.sweep.config import ConfigError, parse_config
from iobench.sweep.outcome import last_words
from loaders import StageStats
from tests.helpers.runs import exact_epochs


def _rank(rank: int, waits: list[float], peers: list[float], compute=0.02, allreduce=0.005) -> RankInput:
    rows, t = [], 0.0
    for i, (w, p) in enumerate(zip(waits, peers, strict=True)):
        end = t + w + p + compute + allreduce
        rows.append(StepRow(i, 0, i == 0, t, w, 0.0, compute, end, 8, 800, rank, p, allreduce))
        t = end
    return RankInput(rank, rank, 0, "h", rows, epoch_stats=[StageStats()], bound="fetch" if rank else "prep")


def test_a_synchronous_job_counts_the_steps_every_rank_completed():
    # rank 1 waits 100 ms for its data every step; rank 0 waits 10 ms, then 90 ms for rank 1
    slow = _rank(1, [0.1] * 10, [0.0] * 10)
    fast = _rank(0, [0.01] * 9, [0.09] * 9)  # one step fewer: the job's window ends at step 8
    agg = aggregate([fast, slow], synchronous=True)
    assert agg.steps == 8 and agg.metrics.samples == 2 * 8 * 8  # steps 1..8, both ranks, 8 samples each
    wall = agg.end - agg.start
    assert wall == pytest.approx(8 * 0.125)
    assert agg.metrics.samples_per_s == pytest.approx(128 / wall)
    assert agg.peer_wait_fraction == pytest.approx((8 * 0.09) / (2 * wall))
    assert agg.slowest.rank == 1  # the one the other waited for
    fast_rank = agg.ranks[0]
    assert fast_rank.free_running_au == pytest.approx(8 * 0.02 / (wall - 8 * 0.09))
    assert (
        agg.straggler_cost == pytest.approx(agg.free_running_au - agg.metrics.au)
        and agg.straggler_cost > 0.05
    )


def test_free_running_ranks_sum_what_each_delivered():
    fast = _rank(0, [0.01] * 20, [0.0] * 20)
    slow = _rank(1, [0.1] * 10, [0.0] * 10)
    agg = aggregate([fast, slow], synchronous=False)
    assert agg.metrics.samples_per_s == pytest.approx(sum(r.samples_per_s for r in agg.ranks))
    assert agg.peer_wait_fraction == 0.0 and agg.straggler_cost == pytest.approx(0.0)
    assert agg.slowest.rank == 1  # by samples/s


def test_the_job_counts_each_devices_busy_time_and_its_trainers_host():
    from dataclasses import replace

    from iobench.results.figures import StepAlone

    # an emulated trainer's step: 20 ms of compute of which 8 ms on the device (the host worked the
    # rest); rank 0 alone steps in 10 ms, rank 1 in 20 ms; each step's batch took its readers 6 ms
    # of CPU in worker processes
    runs = []
    for rank, alone_s in ((0, 0.010), (1, 0.020)):
        run = _rank(rank, [0.01] * 10, [0.0] * 10)
        run.rows[:] = [replace(r, device_s=0.008, trainer_cpu_s=0.015, reader_cpu_s=0.006) for r in run.rows]
        runs.append(
            replace(run, alone=StepAlone(alone_s, alone_s, None, 0.015, 10), au_basis="emulated device time")
        )
    agg = aggregate(runs, synchronous=True)
    wall = agg.end - agg.start
    # device busy over every rank's time, not compute: the steps inside, and the parts of the
    # steps across the interval's edges that ran inside it
    busy = sum(e.device for e in agg.entries if agg.start <= e.start_s and e.end_s <= agg.end)
    assert agg.metrics.au == pytest.approx(busy / (2 * wall), rel=0.05)
    assert agg.metrics.au == pytest.approx(agg.split.device)
    assert sum(agg.split.parts().values()) == pytest.approx(1.0)
    assert agg.metrics.au_basis == "emulated device time"
    assert agg.metrics.step_alone_s == pytest.approx(0.010)  # the median rank's (the lower of two)
    assert agg.metrics.trainer_slowdown == pytest.approx((0.02 / 0.010 + 0.02 / 0.020) / 2)
    assert agg.metrics.trainer_cpu_ms_per_step == pytest.approx(15.0)
    assert agg.metrics.loader_cores == pytest.approx(2 * 0.006 * agg.steps / wall, rel=0.15)
    # the epochs, weighted by their window seconds, give the job's AU
    epochs = agg.epochs
    weighted = sum(e.window_au * e.window_s for e in epochs if e.window_au is not None)
    assert weighted / sum(e.window_s for e in epochs) == pytest.approx(agg.metrics.au)


def _rows(rank: int, ends: list[float], samples: int = 10, wait: float = 0.05) -> list[StepRow]:
    """Steps back to back ending at ``ends``; the first is warm-up; each waits ``wait`` then computes."""
    rows, start = [], 0.0
    for i, end in enumerate(ends):
        compute = end - start - wait
        rows.append(StepRow(i, 0, i == 0, start, wait, 0.0, compute, end, samples, 1000 * samples, rank))
        start = end
    return rows


def _run(rank: int, rows: list[StepRow], host: str = "h") -> RankRun:
    log = StepLog(rows=rows, time_to_first_batch_s=rows[0].t_end)
    verdict = Verdict(bound="prep", binding_stage="decode", headline="")
    return RankRun(rank, rank, 0, host, 1, log, verdict, "fixed", 100.0 + rank / 1000)


def _inputs(*runs: RankRun) -> list[RankInput]:
    return [r.as_input() for r in runs]


def test_the_common_interval_runs_from_the_last_warmup_to_the_first_finish():
    fast = _run(0, _rows(0, [0.5, 1.0, 1.5, 2.0, 2.5]))
    slow = _run(1, _rows(1, [0.8, 1.6, 2.4, 3.2]), host="g")
    assert common_interval(_inputs(fast, slow)) == (0.8, 2.5)
    agg = aggregate(_inputs(fast, slow))
    # fast: steps ending at 1.0, 1.5, 2.0, 2.5; slow: ends at 1.6, 2.4 (3.2 is past the end)
    assert [r.samples for r in agg.ranks] == [40, 20]
    assert agg.metrics.samples == 60 and agg.metrics.bytes_read == 60_000
    assert agg.metrics.samples_per_s == pytest.approx(60 / 1.7)
    assert agg.metrics.samples_per_s == pytest.approx(sum(r.samples_per_s for r in agg.ranks))
    assert agg.skew == pytest.approx(2.0) and agg.slowest.rank == 1 and agg.slowest.host == "g"
    # time is clipped to the interval: fast's step (0.5, 1.0] waits 0.5-0.55, outside; computes 0.55-1.0,
    # of which 0.8-1.0 inside
    fast_compute = 0.2 + 3 * 0.45
    assert agg.ranks[0].au == pytest.approx(fast_compute / 1.7)
    assert agg.ranks[0].stall_fraction == pytest.approx(3 * 0.05 / 1.7)
    assert agg.metrics.au == pytest.approx((agg.ranks[0].au + agg.ranks[1].au) / 2)
    assert agg.alignment_s == pytest.approx(0.001)
    assert agg.metrics.time_to_first_batch_s == 0.8  # the job waits for its slowest first batch
    log = merged_log([fast, slow], agg.start, agg.end)
    assert len(log.rows) == 9 and log.measure_start == 0.8


def test_ranks_that_never_ran_together_are_refused_with_what_to_change():
    early = _run(0, _rows(0, [0.2, 0.4]))
    late = _run(1, _rows(1, [1.0, 2.0]))
    with pytest.raises(
        ValueError, match=r"rank 0 ran its last step to 0.40 s, before rank 1's warm-up ended"
    ):
        aggregate(_inputs(early, late))


def test_a_rank_list_makes_one_cell_per_rank_count_and_diagnose_needs_one_rank():
    raw = {
        "dataset": {"path": "/data/x"},
        "tiers": [{"kind": "local", "name": "nvme"}],
        "loaders": [{"kind": "torch", "workers": [2]}],
        "accelerators": [{"kind": "emulated", "type": "h100"}],
        "run": {"ranks_per_node": [1, 2, 4], "min_measure": exact_epochs()},
    }
    cells = parse_config(raw).cells()
    assert [c.cell_id for c in cells] == [
        "nvme-torch-w2-b64-h100x1-cold",
        "nvme-torch-w2-b64-h100x1-cold-r2",
        "nvme-torch-w2-b64-h100x1-cold-r4",
    ]
    assert [c.run.ranks_per_node for c in cells] == [1, 2, 4]
    raw["run"] = {"ranks_per_node": 2, "nodes": 3}
    assert parse_config(raw).cells()[0].cell_id.endswith("-cold-n3r2")
    for run, message in (
        ({"ranks_per_node": 0}, r"run.ranks_per_node\[0\]=0: expected an integer >= 1"),
        ({"nodes": "two"}, "run.nodes='two': expected an integer >= 1"),
        ({"record_keys": "yes"}, "run.record_keys='yes': expected true or false"),
        ({"ranks_per_node": 2, "diagnose": True}, "measured on one rank"),
    ):
        raw["run"] = run
        with pytest.raises(ConfigError, match=message):
            parse_config(raw)


def test_each_node_names_its_place_and_torchrun_meets_at_node_zero(tmp_path):
    def args(rank=None, endpoint=None):
        return argparse.Namespace(node_rank=rank, rdzv_endpoint=endpoint)

    assert node_place(args(), 1) is None
    assert node_place(args(), 2, required=False) is None  # a dry run plans without a place
    with pytest.raises(ValueError, match="--node-rank K"):
        node_place(args(), 2)
    with pytest.raises(ValueError, match=r"--node-rank=2: expected 0 \.\. 1"):
        node_place(args(2, "h:1"), 2)
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        node_place(args(1, "h"), 2)
    with pytest.raises(ValueError, match=r"only for a sweep with run\.nodes > 1"):
        node_place(args(0, "h:1"), 1)
    place = node_place(args(1, "node0:29500"), 2)
    run = RunSettings(ranks_per_node=4, nodes=2, timeout_s=60)
    cmd = cell_command(tmp_path / "c.json", tmp_path, run, place=place, run_id="c")
    assert cmd[1:3] == ["-m", "iobench.cell.entry.torchrun"]
    for flag in (
        "--nproc-per-node=4",
        "--nnodes=2",
        "--node-rank=1",
        "--master-addr=node0",
        "--master-port=29500",
    ):
        assert flag in cmd
    assert cmd[-4:] == ["-m", "iobench.cell.entry.rank", str(tmp_path / "c.json"), str(tmp_path)]
    solo = cell_command(tmp_path / "c.json", tmp_path, RunSettings(ranks_per_node=2), place=None, run_id="c")
    assert "--standalone" in solo and not any(a.startswith("--nnodes") for a in solo)
    one = cell_command(tmp_path / "c.json", tmp_path, RunSettings(), place=None, run_id="c")
    assert one[1:3] == ["-m", "iobench.cell.entry.process"]


def test_the_first_failure_is_the_cause(tmp_path):
    for rank, t, error in ((0, 2.0, "rank 0: gloo connection closed"), (1, 1.0, "rank 1: SampleError")):
        (tmp_path / f"rank-{rank}.error.json").write_text(json.dumps({"rank": rank, "t": t, "error": error}))
    assert first_rank_error(tmp_path) == "rank 1: SampleError (and 1 other rank(s) failed after it)"
    assert first_rank_error(tmp_path / "none") is None
    torchrun_tail = """
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_15:15:57
  host      : node1
  rank      : 3 (local_rank: 1)
  exitcode  : -9 (pid: 26747)
  error_file: <N/A>
============================================================"""
    assert (
        last_words(torchrun_tail) == "torchrun: host node1, rank 3 (local_rank: 1), exitcode -9 (pid: 26747)"
    )
    assert last_words("one\nValueError: two\n") == "ValueError: two"
