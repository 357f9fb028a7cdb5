"""The probe's decisions from a job's records: when the window is long enough (every rank, warm-up
read off the steps), where it ends (ahead of every rank), when the ceilings are done, and in words
what it saw of a job it could not measure."""

from __future__ import annotations

import pytest

from iobench.probe.command import JobCommand
from iobench.probe.plan import phases_done, window_plan
from iobench.probe.reader import RECORDS, Follower, Job
from iobench.probe.seen import what_was_seen
from iobench.results.spec import MinMeasure
from tests.unit.probe.jobkit import Loop, hello, record


def test_the_window_closes_once_long_enough_and_ends_ahead_of_the_loop(tmp_path):
    Loop(steps=30, wait=0.05, step=0.05).write(tmp_path)  # 0.1 s a step: 3 s measured
    job = Follower(tmp_path).read()
    assert window_plan(job, MinMeasure(steps=50, seconds=30, need="either"), ceilings=False) is None
    plan = window_plan(job, MinMeasure(steps=20, seconds=2, need="either"), ceilings=True)
    assert plan is not None
    # 31 steps recorded; 1.5 s of 0.1 s steps ahead
    assert plan.end == 31 + 15
    assert plan.streams["4242-0"]["stop"] == 0  # one rank stops right after its phases
    (stream,) = plan.streams.values()
    assert stream["replay"] == 3 + 40 and stream["alone_s"] == 3.0  # 2 s of 0.05 s steps, 3 settling
    assert plan.warmup["4242-0"] == 1


def test_ranks_in_step_all_wait_for_the_last_rank_and_share_one_end(tmp_path):
    Loop(steps=60, pid=100, rank=0).write(tmp_path)
    job = Follower(tmp_path).read()
    assert (
        window_plan(job, MinMeasure(steps=20, seconds=1, need="either"), ceilings=False) is None
    )  # rank 1 of 2 not seen yet
    Loop(steps=62, pid=200, rank=1).write(tmp_path)
    plan = window_plan(
        Follower(tmp_path).read(), MinMeasure(steps=20, seconds=1, need="either"), ceilings=False
    )
    assert plan is not None and set(plan.streams) == {"100-0", "200-0"}
    assert plan.end > 63  # past the furthest rank
    assert (
        plan.streams["100-0"]["stop"] == plan.streams["200-0"]["stop"] == plan.end
    )  # no ceilings: at the end


def test_the_phases_are_done_when_every_stream_ran_its_loader_alone_or_stopped(tmp_path):
    Loop(steps=40).write(tmp_path)
    follower = Follower(tmp_path)
    plan = window_plan(follower.read(), MinMeasure(steps=20, seconds=1, need="either"), ceilings=True)
    assert not phases_done(follower.job, plan, ceilings=True)
    with open(tmp_path / "p4242.jsonl", "a") as f:
        f.write('["alone","4242-0",1.0,1.1,4.0,30,480,4,false]\n')
    assert phases_done(follower.read(), plan, ceilings=True)


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        ([], "no Python process of `python train.py` loaded the probe"),
        (
            [hello(pid=7)],
            "1 Python process(es) ran (train.py) but none imported torch.utils.data; the job exited with code 0",
        ),
        (
            [
                hello(pid=7),
                record("torch", t=1.0, version="2.13.0"),
            ],
            "torch 2.13.0 was imported, but no torch.utils.data.DataLoader (nor a DALI iterator) was iterated",
        ),
    ],
)
def test_what_was_seen_of_a_job_that_was_not_measured(lines, said):
    job = Job()
    for r in lines:
        job.add(7, r[0], RECORDS[r[0]](*r[1:]))
    assert said in what_was_seen(job, 0, JobCommand(("python", "train.py"), "train"))


def test_the_windows_end_is_set_at_the_windows_own_pace_epoch_openings_included():
    from iobench.probe.plan import end_step
    from iobench.probe.steps import Step

    # steps of 1 ms from a queue, but every tenth waits 2 s for a new epoch's workers: 0.2 s a step
    steps, t = [], 0.0
    for i in range(50):
        wait = 2.0 if i % 10 == 0 else 0.0
        steps.append(Step(i, i // 10, t, t + wait, t + wait + 0.001, 4, 0, 0.001))
        t += wait + 0.001
    ahead = end_step([50], steps) - 50
    assert 3 <= ahead <= 10  # 1.5 s at the window's pace, not 1,500 steps of 1 ms
