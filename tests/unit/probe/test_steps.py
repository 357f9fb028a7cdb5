"""A stream's steps read back from its records: each step ends at the loop's next call, an epoch's first
step waits from its iter(), the last step is not a step until the loop asks again, and the phases
after the window are kept apart."""

from __future__ import annotations

import json

import pytest

from iobench.probe.reader import Follower
from iobench.probe.steps import main_stream, measured, replayed_steps, stream_steps
from tests.unit.probe.jobkit import PID, Loop, hello, record


def test_each_step_runs_from_its_call_to_the_next_call(tmp_path):
    Loop(steps=10, wait=0.05, step=0.01, replayed=4).write(tmp_path)
    job = Follower(tmp_path).read()
    tag = main_stream(job, PID)
    steps = stream_steps(job, tag)
    assert len(steps) == 14  # the 15th record has no next call yet
    first = measured(steps)
    assert len(first) == 10 and len(replayed_steps(steps)) == 4
    assert first[0].wait_s == pytest.approx(1.05)  # from the iter() a second before, workers starting
    for s in first[1:]:
        assert s.wait_s == pytest.approx(0.05)
        assert s.host_s == pytest.approx(0.01)
        assert s.cpu_s == pytest.approx(0.004)
    assert [s.index for s in steps] == list(range(14))


def test_an_epoch_ends_a_step_and_its_first_step_waits_from_iter(tmp_path):
    tag = f"{PID}-0"
    lines = [
        hello(),
        record("epoch", tag=tag, t=1.0, t_ready=1.2, epoch=0),
        record("step", tag=tag, t_call=1.2, t_return=1.5, cpu_call=0.0, samples=4, phase=0),
        record("step", tag=tag, t_call=1.6, t_return=1.7, cpu_call=0.1, samples=4, phase=0),
        record("end", tag=tag, t_call=1.9, t_return=1.95),
        # the job's own time between epochs (an evaluation), then the next epoch
        record("epoch", tag=tag, t=3.0, t_ready=3.5, epoch=1),
        record("step", tag=tag, t_call=3.5, t_return=3.6, cpu_call=0.5, samples=2, phase=0),
        record("step", tag=tag, t_call=3.8, t_return=3.9, cpu_call=0.6, samples=2, phase=0),
    ]
    (tmp_path / f"p{PID}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    steps = stream_steps(Follower(tmp_path).read(), tag)
    assert [(s.epoch, s.t_start, s.t_end) for s in steps] == [(0, 1.0, 1.6), (0, 1.6, 1.9), (1, 3.0, 3.8)]
    assert steps[0].open_s == pytest.approx(0.2) and steps[2].open_s == pytest.approx(0.5)
    assert steps[1].cpu_s is None  # the epoch ended at the next call: no CPU reading there
    assert steps[0].wait_s == pytest.approx(0.5)


def test_a_line_still_being_written_waits_for_the_next_read(tmp_path):
    Loop(steps=5).write(tmp_path)
    path = tmp_path / f"p{PID}.jsonl"
    whole = path.read_text()
    path.write_text(whole[:-10])  # the last line torn
    follower = Follower(tmp_path)
    torn = sum(len(v) for v in follower.read().steps.values())
    path.write_text(whole)
    assert sum(len(v) for v in follower.read().steps.values()) == torn + 1


def _fetch(tag: str, worker: int, t0: float, t1: float) -> list:
    return record(
        "fetch",
        tag=tag,
        worker=worker,
        t0=t0,
        t1=t1,
        get_wall=t1 - t0,
        get_cpu=t1 - t0,
        get_runq=0.0,
        collate_wall=0.0,
        collate_cpu=0.0,
        collate_runq=0.0,
        samples=4,
        rchar=400,
        read_bytes=0,
    )


def test_an_epochs_opening_lasts_until_every_worker_began_its_first_batch(tmp_path):
    # two spawned workers that take 2 s to start: each epoch's first steps wait for them, and that
    # wait is the epoch's opening, not the making of the batches
    tag = f"{PID}-0"
    lines = [hello()]
    for epoch, t in enumerate((10.0, 20.0)):
        lines += [
            record("epoch", tag=tag, t=t, t_ready=t + 0.03, epoch=epoch),
            _fetch(tag, 0, t + 2.0, t + 2.2),
            _fetch(tag, 1, t + 2.1, t + 2.3),
            record("step", tag=tag, t_call=t + 0.03, t_return=t + 2.2, cpu_call=0.0, samples=4, phase=0),
            record("step", tag=tag, t_call=t + 2.21, t_return=t + 2.3, cpu_call=0.1, samples=4, phase=0),
            record("step", tag=tag, t_call=t + 2.31, t_return=t + 2.32, cpu_call=0.2, samples=4, phase=0),
            record("end", tag=tag, t_call=t + 2.33, t_return=t + 2.34),
        ]
    (tmp_path / f"p{PID}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    steps = stream_steps(Follower(tmp_path).read(), tag)
    # the first step waits from iter() to its batch: 2.1 s of it until the second worker began
    assert steps[0].open_s == pytest.approx(2.1) and steps[0].wait_s == pytest.approx(2.2)
    assert steps[1].open_s == 0.0 and steps[3].open_s == pytest.approx(2.1)
