"""A probed window judged by the one judge (analysis/verdict.py) through the probe's adapter
(probe/publish.py: its readers' time as the same evidence a cell's give): each bound on numbers
chosen so that only it fits, and the differential of the two ceilings agreeing with it or not."""

from __future__ import annotations

from dataclasses import replace

import pytest

from iobench.analysis.differential import combine
from iobench.analysis.evidence import Evidence, reader_work
from iobench.analysis.verdict import judge as one_judge
from iobench.probe.publish import PROBE_WORDS, UNSEEN_ACTION, stage_stats
from iobench.probe.workers import LoaderWork
from iobench.results.figures import Ceiling, Ceilings, CoreBudget, PipelineMetrics, Verdict, WallSplit
from tests.helpers.summaries import wall_split


def judge(
    m: PipelineMetrics,
    w: LoaderWork | None,
    *,
    cores: int,
    workers: int,
    split: WallSplit | None = None,
    unseen: str | None = None,
    budget: CoreBudget | None = None,
    ceilings: Ceilings | None = None,
) -> Verdict:
    work = (
        reader_work(stage_stats(w), readers=max(1, workers), workers=workers, busy=w.busy, words=PROBE_WORDS)
        if w is not None
        else None
    )
    return one_judge(
        Evidence(
            metrics=m,
            work=work,
            cores=cores,
            split=split,
            budget=budget,
            unseen=unseen,
            unseen_action=UNSEEN_ACTION,
            ceilings=ceilings,
        )
    )


def metrics(au: float, stall: float, **more: float) -> PipelineMetrics:
    wall = 10.0
    return PipelineMetrics(
        steps=100,
        samples=1600,
        wall_s=wall,
        samples_per_s=160.0,
        bytes_read=0,
        bytes_per_s=0.0,
        wait_s=stall * wall,
        h2d_s=more.pop("h2d_s", 0.0),
        compute_s=au * wall,
        au=au,
        au_mlperf=None,
        stall_fraction=stall,
        wait_p50_ms=10.0,
        wait_p95_ms=20.0,
        wait_p99_ms=30.0,
        wait_max_ms=40.0,
        time_to_first_batch_s=1.0,
        au_basis="CPU step (the host is the device)",
        trainer_cores=0.2,
        **more,
    )


def work(
    *,
    blocked_ms: float = 0.0,
    cpu_ms: float = 0.0,
    runq_ms: float = 0.0,
    collate_ms: float = 0.1,
    busy: float = 1.0,
    readers: int = 2,
) -> LoaderWork:
    samples, seconds = 1000, 10.0
    get_wall = (blocked_ms + cpu_ms + runq_ms) * samples / 1000.0
    return LoaderWork(
        readers=readers,
        seconds=seconds,
        batches=samples // 16,
        samples=samples,
        get_wall_s=get_wall,
        get_cpu_s=cpu_ms * samples / 1000.0,
        get_runq_s=runq_ms * samples / 1000.0,
        collate_wall_s=collate_ms * samples / 1000.0,
        collate_cpu_s=collate_ms * samples / 1000.0,
        collate_runq_s=0.0,
        busy_s=busy * seconds * readers,
        rchar=samples * 100_000,
        read_bytes=0,
    )


def test_an_input_pipeline_that_keeps_the_step_busy_is_not_the_limit():
    v = judge(metrics(0.95, 0.03), work(cpu_ms=5, busy=0.3), cores=2, workers=2)
    assert v.bound == "accelerator"


ROOM = CoreBudget(usable=2, trainer=0.2, readers=0.6, own=0.0, others=0.0)


def test_workers_blocked_in_the_dataset_are_fetch_bound():
    v = judge(metrics(0.2, 0.8), work(blocked_ms=40, cpu_ms=3), cores=2, workers=2, budget=ROOM)
    assert (v.bound, v.binding_stage) == ("fetch", "fetch")
    assert "40.00 ms waiting on storage" in v.evidence[0]
    assert "more workers (the CPU has room: 0.8 of 2 cores busy)" in v.action


def test_workers_on_the_cpu_are_prep_bound_and_cores_spent_say_so():
    v = judge(metrics(0.3, 0.7), work(cpu_ms=8, runq_ms=3, blocked_ms=0.5), cores=2, workers=2, budget=ROOM)
    assert (v.bound, v.binding_stage) == ("prep", "decode")
    assert "decode/augment in the dataset" in v.headline and "more workers" in v.action
    spent = CoreBudget(
        usable=2, trainer=0.2, readers=1.8, own=0.0, others=0.0
    )  # 2 readers' worth and the trainer
    v = judge(metrics(0.3, 0.7), work(cpu_ms=20, runq_ms=5, blocked_ms=0.5), cores=2, workers=2, budget=spent)
    assert v.bound == "cores" and "the cores are spent" in v.headline
    assert "more workers" not in v.action and "fewer workers" not in v.action


def test_idle_workers_while_the_loop_waits_are_the_hand_over():
    v = judge(metrics(0.5, 0.5), work(cpu_ms=2, busy=0.2), cores=4, workers=2)
    assert (v.bound, v.binding_stage) == ("prep", "collate")
    assert "collate/IPC" in v.headline
    # with the batches matched to their making, idle readers' waits are split by the measured
    # hand-over; a reader busy nearly all the time sets the rate however late its batches arrive
    split = wall_split(fetch=0.05, decode=0.05, handover=0.4, device=0.5)
    v = judge(metrics(0.5, 0.5), work(cpu_ms=2, busy=0.2), cores=4, workers=2, split=split)
    assert v.binding_stage == "collate"
    v = judge(metrics(0.5, 0.5), work(cpu_ms=2, busy=0.95), cores=4, workers=2, split=split)
    assert v.binding_stage == "decode"
    v = judge(
        metrics(0.5, 0.5),
        work(cpu_ms=2, busy=0.2),
        cores=4,
        workers=2,
        split=replace(split, handover=0.05, decode=0.4),
    )
    assert v.binding_stage == "decode"


def test_copies_that_outweigh_the_waits_are_h2d():
    v = judge(metrics(0.6, 0.05, h2d_s=3.0), work(cpu_ms=2), cores=2, workers=2)
    assert (v.bound, v.binding_stage) == ("prep", "h2d")


def test_a_stretched_step_with_its_data_there_is_host_bound():
    m = metrics(0.8, 0.02, step_alone_s=0.03, trainer_slowdown=2.5)
    m = replace(m, compute_s=8.0)
    v = judge(m, work(cpu_ms=30, runq_ms=10), cores=2, workers=2)
    assert v.bound == "host"


def test_without_the_readers_the_stage_is_not_named():
    v = judge(metrics(0.3, 0.7), None, cores=2, workers=0, unseen="DALI runs its pipeline in its own threads")
    assert v.bound == "unknown"
    assert any("DALI" in line for line in v.evidence) and v.action == UNSEEN_ACTION


@pytest.mark.parametrize(
    ("online", "ceilings", "binding", "agree"),
    [
        ("prep", {"accelerator": 1500.0, "prep": 400.0}, "prep", True),
        ("fetch", {"accelerator": 900.0, "fetch": 45.0}, "fetch", True),
        ("accelerator", {"accelerator": 23.0, "prep": 300.0}, "accelerator", True),
        ("host", {"accelerator": 23.0, "prep": 300.0}, "accelerator", True),
        ("prep", {"accelerator": 23.0, "prep": 300.0}, "accelerator", False),
    ],
)
def test_the_two_ceilings_name_the_binding_part_and_say_whether_the_timers_agree(
    online, ceilings, binding, agree
):
    v = judge(metrics(0.3, 0.7), work(cpu_ms=8), cores=2, workers=2)
    a = combine(ceilings, replace(v, bound=online), measured_samples_per_s=160.0, au=0.3)
    assert (a.binding, a.agree, a.online_bound) == (binding, agree, online)


def test_a_loader_whose_stages_are_unseen_is_told_by_the_two_ceilings():
    def told(ceilings: Ceilings) -> Verdict:
        dali = "DALI runs its pipeline in its own threads"
        return judge(metrics(0.4, 0.6), None, cores=2, workers=0, unseen=dali, ceilings=ceilings)

    def step(rate: float) -> Ceiling:
        return Ceiling("accelerator", rate, 100, 1.0)

    # the loader alone is named prep or fetch by what bound its readers: either is told
    for alone in (
        Ceilings(prep=Ceiling("prep", 91.0, 100, 1.1)),
        Ceilings(fetch=Ceiling("fetch", 91.0, 100, 1.1)),
    ):
        v = told(replace(alone, accelerator=step(1300.0)))
        assert v.bound == "unknown" and "the loader alone delivered 91/s" in v.headline and "DALI" in v.action
        assert told(replace(alone, accelerator=step(50.0))).bound == "accelerator"
        assert "loader alone" not in told(alone).headline  # the step alone was not measured: nothing told
    assert "loader alone" not in told(Ceilings(accelerator=step(50.0))).headline


def test_readers_waiting_for_a_core_more_than_working_say_who_holds_the_cores():
    # the job's own processes use little of the host, other processes some of it: waiting for cores
    others = CoreBudget(usable=4, trainer=0.1, readers=0.3, own=0.0, others=1.5)
    v = judge(
        metrics(0.05, 0.95),
        work(blocked_ms=40, cpu_ms=4, runq_ms=42, busy=0.95),
        cores=4,
        workers=2,
        budget=others,
    )
    assert (v.bound, v.binding_stage) == ("prep", "decode")
    assert "waiting for a core" in v.headline and "other processes used 1.5 of the 4 cores" in v.evidence[0]
    assert v.action.startswith("free the host's cores")
