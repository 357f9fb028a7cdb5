"""The one judge (analysis/verdict.py): a synchronous job's verdict (straggler-bound when its ranks
wait for the slowest more than for their own data, all-reduce-bound when the modelled all-reduce
costs more, else the stage timers'), the trainer's host in it and in the metrics (device busy time,
AU from it, the step alone, the slowdown, the verdict "host", a trainer short of its demand), and
the core budget (the cores spent: no worker count advised)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iobench.analysis.evidence import SyncFacts
from iobench.analysis.verdict import AU_ON_HOST
from iobench.results.figures import CoreBudget, StepAlone, StepRow, Verdict
from loaders import StageStats
from tests.helpers.summaries import judge_of, metrics_of, wall_split


def _fetch_stats() -> StageStats:
    s = StageStats(samples=640)
    s.add_time("fetch", 6.4, 0.3)
    s.add_time("decode", 0.6, 0.6)
    return s


def _verdict(au: float = 0.3, **shares) -> Verdict:
    base = {"data_wait": 0.2, "peer_wait": 0.1, "allreduce": 0.05, "straggler_cost": 0.2}
    sync = SyncFacts(**{**base, **shares}, slowest="rank 3: its tier is slow", fabric="ib")
    rows = _rows(10, wait=0.1 * (1 - au) / au, compute=0.1, device=0.1)
    return judge_of(metrics_of(rows), _fetch_stats(), workers=2, cores=2, sync=sync)


def test_waiting_for_peers_most_is_straggler_bound_naming_the_slowest():
    v = _verdict(peer_wait=0.5)
    assert v.bound == "straggler" and "50 % of the time for the slowest rank" in v.headline
    assert any("rank 3: its tier is slow" in e for e in v.evidence)
    assert any("cost 0.20 of AU" in e for e in v.evidence)


def test_an_allreduce_longer_than_the_waits_is_allreduce_bound():
    v = _verdict(allreduce=0.6)
    assert v.bound == "allreduce" and "ib" in v.headline


def test_otherwise_the_stage_timers_verdict_stands_with_the_split_as_evidence():
    v = _verdict()
    assert v.bound == "fetch" and any("waiting for the slowest rank" in e for e in v.evidence)
    assert (
        _verdict(au=0.95, peer_wait=0.9).bound == "accelerator"
    )  # accelerator-bound jobs are not stragglers


def _rows(
    n: int,
    *,
    wait: float,
    compute: float,
    device: float | None,
    cpu: float | None = 0.05,
    loader_cpu_s: float = 0.0,
) -> list[StepRow]:
    """``n`` steps; ``loader_cpu_s``: the readers' CPU over all of them."""
    rows, t = [], 0.0
    for i in range(n):
        end = t + wait + compute
        rows.append(
            StepRow(
                i, 0, False, t, wait, 0.0, compute, end, 64, 1000, device_s=device, trainer_cpu_s=cpu,
                reader_cpu_s=loader_cpu_s / n,
            )
        )  # fmt: skip
        t = end
    return rows


def _stats(loader_cpu_s: float) -> StageStats:
    s = StageStats(samples=640)
    s.add_time("decode", loader_cpu_s, loader_cpu_s)
    return s


def test_au_is_the_device_busy_time_capped_at_the_step_alone_on_a_gpu():
    # a GPU whose step spans 0.10 s in the cell (a slow host launching it) but 0.04 s alone
    rows = _rows(10, wait=0.0, compute=0.10, device=0.10)
    gpu = metrics_of(rows, alone=StepAlone(0.05, 0.05, 0.04, 0.02, 5), au_basis="GPU busy (CUDA events)")
    assert gpu.device_busy_s == pytest.approx(0.4)
    assert gpu.au == pytest.approx(0.4)
    assert gpu.trainer_slowdown == pytest.approx(2.0) and gpu.step_alone_s == 0.05
    assert gpu.au_basis == "GPU busy (CUDA events)"
    # on CPU (no device span alone) nothing caps it: the host is the device
    cpu = metrics_of(rows, alone=StepAlone(0.05, 0.05, None, 0.05, 5))
    assert cpu.au == pytest.approx(1.0)


def test_rows_without_device_time_take_the_compute_and_no_alone_means_no_slowdown():
    m = metrics_of(_rows(4, wait=0.1, compute=0.1, device=None, cpu=None))
    assert m.au == pytest.approx(0.5) and m.device_busy_s == pytest.approx(0.4)
    assert m.trainer_slowdown is None and m.trainer_cpu_ms_per_step is None


def test_trainer_cpu_and_loader_cores():
    m = metrics_of(_rows(10, wait=0.0, compute=0.1, device=0.1, cpu=0.03, loader_cpu_s=0.5))
    assert m.trainer_cpu_ms_per_step == pytest.approx(30.0)
    assert m.loader_cores == pytest.approx(0.5) and m.trainer_cores == pytest.approx(0.3)
    assert m.cores_used == pytest.approx(0.8)


def test_readers_in_the_trainers_process_are_counted_once_as_the_loaders():
    # no workers: the readers' 0.5 CPU-s is inside the process's 0.8 CPU-s, not beside it
    rows = _rows(10, wait=0.0, compute=0.1, device=0.1, cpu=0.08, loader_cpu_s=0.5)
    m = metrics_of(rows, readers_in_process=True)
    assert m.loader_cores == pytest.approx(0.5)
    assert m.trainer_cores == pytest.approx(0.3) and m.trainer_cpu_ms_per_step == pytest.approx(30.0)
    assert m.cores_used == pytest.approx(0.8)


def _host_verdict(
    *, wait: float, compute: float, alone: float, loader_cpu_s: float = 1.5, cores: int = 2, budget=None
):
    rows = _rows(10, wait=wait, compute=compute, device=compute, cpu=compute, loader_cpu_s=loader_cpu_s)
    # on the CPU, where the host is the device: a stretched step keeps the "device" busy
    m = metrics_of(rows, alone=StepAlone(alone, alone, None, alone, 5), au_basis=AU_ON_HOST)
    return judge_of(m, _stats(loader_cpu_s), workers=2, cores=cores, budget=budget)


def test_a_step_stretched_while_its_data_was_there_is_host_bound_whatever_its_au():
    v = _host_verdict(wait=0.0, compute=0.3, alone=0.1, loader_cpu_s=3.0)
    assert v.bound == "host" and "3.0x" in v.headline
    said = " ".join(v.evidence)
    assert "300.0 ms (median) in the window against 100.0 ms alone" in said
    assert "CPU-ms per step" in said


def test_cores_the_trainer_and_the_readers_fill_are_spent_and_no_worker_count_is_advised():
    spent = CoreBudget(usable=2, trainer=1.0, readers=0.95, own=0.01, others=0.0)
    v = _host_verdict(wait=0.0, compute=0.3, alone=0.1, loader_cpu_s=3.0, budget=spent)
    assert v.bound == "cores" and v.name == "cores-bound" and "the cores are spent" in v.headline
    assert "worker" not in v.action.replace("no worker count helps", "")
    assert v.budget == spent
    # the same window with cores to spare: the trainer's stretch is its own finding
    free = replace(spent, usable=8)
    assert _host_verdict(wait=0.0, compute=0.3, alone=0.1, loader_cpu_s=3.0, budget=free).bound == "host"


def test_other_processes_that_take_the_cores_are_named():
    busy = CoreBudget(usable=2, trainer=0.3, readers=0.4, own=0.0, others=1.2)
    v = _host_verdict(wait=0.5, compute=0.2, alone=0.2, loader_cpu_s=0.1, budget=busy)
    assert v.bound == "cores" and "other processes used 1.2" in v.action
    assert "other processes 1.2 of 2" in " ".join(v.evidence)


def test_a_slightly_slower_step_or_one_that_waits_more_for_data_is_not_host_bound():
    assert _host_verdict(wait=0.0, compute=0.12, alone=0.1).bound == "accelerator"
    # stretched 2x, but the data waits take more of the wall than the stretch
    assert _host_verdict(wait=0.5, compute=0.2, alone=0.1).bound == "prep"
    # stretched 3x and the stretch larger than the waits, but a fifth of the wall waiting for data:
    # the loader sets the pace
    assert _host_verdict(wait=0.1, compute=0.3, alone=0.1).bound == "prep"


def test_a_trainer_that_stepped_faster_in_the_cell_than_alone_takes_its_cell_rate():
    # measured here: the run alone met a busier host (61 ms a step at best) than the cell's steps
    # (37 ms median): the cell's steps show what the trainer can take, and no trainer-short finding
    rows = _rows(10, wait=0.2, compute=0.037, device=64 / 7000, cpu=0.020)
    m = metrics_of(rows, alone=StepAlone(0.126, 0.061, None, 0.020, 5))
    assert m.trainer_alone_samples_per_s == pytest.approx(64 / 0.037)
    v = judge_of(m, _stats(0.5), workers=2, cores=2, demand=1500.0)
    assert not any(e.startswith("the trainer alone steps at") for e in v.evidence)


def _short(alone: StepAlone) -> Verdict:
    # an emulated H100 at batch 64: 9.1 ms of device time, 20 ms of host work: alone it steps at
    # 64 / 0.020 = 3,200/s of the 7,000/s it demands
    rows = _rows(10, wait=0.002, compute=0.020, device=64 / 7000, cpu=0.020)
    return judge_of(metrics_of(rows, alone=alone), _stats(0.5), workers=2, cores=2, demand=7000.0)


def test_a_trainer_short_of_its_demand_alone_is_said_first_and_caps_what_feeding_it_takes():
    quiet = StepAlone(0.020, 0.019, None, 0.020, 20, step_low_s=0.0195, step_high_s=0.0205, quiet=True)
    v = _short(quiet)
    assert v.evidence[0].startswith("the trainer alone steps at 3,200/s of the 7,000/s demanded")
    assert "cannot pass 0.46" in v.evidence[0]
    # the data kept up with it (stall 9 %): the trainer's own step binds
    assert v.bound == "host" and v.binding_stage == "trainer"
    assert v.cores is not None and v.cores.samples_per_s == pytest.approx(3200.0)
    # a trainer that reaches its demand alone is not flagged, and feeding it takes the demand
    quick = StepAlone(0.009, 0.009, None, 0.009, 5, quiet=True)
    assert _short(quick).binding_stage != "trainer"


def test_a_trainer_timed_alone_on_a_busy_host_is_not_judged_short():
    busy = StepAlone(0.020, 0.019, None, 0.020, 20, quiet=False, others_cores=1.0)
    v = _short(busy)
    assert v.binding_stage != "trainer" and "host-bound before any data" not in v.headline
    assert any("the host was busy" in e and "1.0 cores" in e for e in v.evidence)
    # an interval that reaches the demand does not judge it short either
    wide = StepAlone(0.020, 0.008, None, 0.020, 20, step_low_s=0.008, step_high_s=0.03, quiet=True)
    assert "host-bound before any data" not in _short(wide).headline


def test_a_window_too_short_to_judge_gives_no_advice():
    from iobench.results.figures import Window

    rows = _rows(4, wait=0.002, compute=0.001, device=0.001)
    crashed = Window(steps=4, seconds=0.012, epochs=1, added_epochs=0, samples_per_s_rel_ci=None, met=False)
    v = judge_of(metrics_of(rows), _stats(0.5), workers=2, cores=2, window=crashed)
    assert v.bound == "unknown" and v.headline.startswith("not judged: the window is 4 step(s) over 0.01 s")
    assert "measure longer" in v.action


def test_a_trainer_blocked_by_its_checkpoint_saves_more_than_by_its_data_is_host_bound_by_them():
    split = wall_split(decode=0.05, device=0.6, host=0.05, checkpoint=0.3)
    rows = _rows(10, wait=0.03, compute=0.06, device=0.06)  # AU 0.67: the saves' time is in the wall
    v = judge_of(metrics_of(rows), _stats(0.5), workers=2, cores=2, split=split)
    assert (v.bound, v.binding_stage) == ("host", "checkpoint") and "30 %" in v.headline
    assert "async_pinned" in v.action


def test_spent_cores_do_not_bind_readers_that_wait_on_their_store():
    # a link at its cap: the readers are blocked whoever holds the cores (other processes here)
    busy = CoreBudget(usable=2, trainer=0.1, readers=0.2, own=0.0, others=1.7)
    rows = _rows(10, wait=0.2, compute=0.02, device=0.02)
    v = judge_of(metrics_of(rows), _fetch_stats(), workers=2, cores=2, budget=busy)
    assert v.bound == "fetch", v.headline
    cpu = _stats(1.5)  # readers on the CPU instead: the spent cores bind
    assert judge_of(metrics_of(rows), cpu, workers=2, cores=2, budget=busy).bound == "cores"
