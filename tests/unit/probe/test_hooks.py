"""The hooks that run inside a probed job, one piece at a time in this process: the import hook, the
records file (a forked child keeps its own), a batch's samples, where a dataset's files live, the
control file, the timed fetch, and the loop's phases after the window."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
import torch
from torch.utils.data._utils.fetch import _MapDatasetFetcher

from iobench.probe.inject._iobench_probe import worker
from iobench.probe.inject._iobench_probe.control import Control, ControlPlan
from iobench.probe.inject._iobench_probe.imports import when_imported
from iobench.probe.inject._iobench_probe.log import Log
from iobench.probe.inject._iobench_probe.loop import Loop, Stream, batch_samples, loader_info
from iobench.probe.reader import parse


def _lines(path) -> list[list]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_hook_runs_once_the_module_is_imported_and_at_once_if_it_already_was(tmp_path, monkeypatch):
    (tmp_path / "probe_hook_target.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    when_imported("probe_hook_target", lambda m: seen.append(m.VALUE))
    assert seen == []
    import probe_hook_target  # noqa: F401

    assert seen == [1]
    when_imported("json", lambda m: seen.append(m.__name__))
    assert seen == [1, "json"]
    del sys.modules["probe_hook_target"]


def test_records_are_written_in_batches_and_a_forked_child_writes_its_own(tmp_path):
    log = Log(str(tmp_path))
    log.write(["error", 1.0, "parent", "pending before the fork"], now=log._last)
    pid = os.fork()
    if pid == 0:  # the child: what its parent had pending is not its own
        log.write(["error", 2.0, "child", "its own"])
        log.flush()
        os._exit(0)
    os.waitpid(pid, 0)
    log.flush()
    assert [r[2] for r in _lines(tmp_path / f"p{os.getpid()}.jsonl")] == ["parent"]
    assert [r[2] for r in _lines(tmp_path / f"p{pid}.jsonl")] == ["child"]


def test_a_processs_first_records_and_its_rare_ones_reach_the_file_at_once(tmp_path):
    # a job killed (SIGKILL) after a few steps leaves them: nothing of it is waiting in memory
    from iobench.probe.inject._iobench_probe.log import EAGER

    log = Log(str(tmp_path))
    path = tmp_path / f"p{os.getpid()}.jsonl"
    step = ["step", "1-0", 1.0, 1.1, 0.5, 8, 0]
    for _ in range(EAGER):
        log.write(step, now=log._last)
    assert len(_lines(path)) == EAGER
    log.write(step, now=log._last)  # a step's numbers past the first: buffered until the next flush
    assert len(_lines(path)) == EAGER
    log.write(["stop", "1-0", 2.0, 70], now=log._last)  # an epoch, a phase, a stop: at once
    assert len(_lines(path)) == EAGER + 2


def test_a_batch_counts_the_leading_size_of_its_first_tensor():
    x = torch.zeros(7, 3)
    assert batch_samples((x, torch.zeros(7)), 1) == 7
    assert batch_samples({"image": x}, 1) == 7
    assert batch_samples([{"data": x}], 1) == 7  # DALI's list of dicts
    assert batch_samples(["a", "b"], 5) == 5  # no tensor: the loader's batch size


def test_a_loader_says_where_its_files_live(tmp_path):
    (tmp_path / "cls").mkdir()

    class Folder(torch.utils.data.Dataset):
        def __init__(self):
            self.samples = [(str(tmp_path / "cls" / f"{i}.jpg"), 0) for i in range(3)]

        def __len__(self):
            return 3

        def __getitem__(self, i):
            return i

    info = loader_info(torch.utils.data.DataLoader(Folder(), batch_size=2), torch)
    assert info["root"] == str(tmp_path / "cls")
    assert (info["batch_size"], info["workers"], info["length"], info["iterable"]) == (2, 0, 3, False)


def test_the_control_file_is_read_when_it_changes(tmp_path):
    control = Control(str(tmp_path))
    control.poll(0.0)
    assert control.plans == {}
    tmp = tmp_path / "tmp.json"
    tmp.write_text(
        json.dumps({"streams": {"1-0": {"end": 5, "replay": 2, "alone_s": 1.0}}, "then": "continue"})
    )
    os.replace(tmp, tmp_path / "control.json")
    control.poll(0.05)  # too soon after the last look
    assert control.plans == {}
    control.poll(1.0)
    assert control.plans == {"1-0": ControlPlan(end=5, replay=2, alone_s=1.0)} and control.then == "continue"


class _Images(torch.utils.data.Dataset):
    def __len__(self):
        return 100

    def __getitem__(self, i):
        time.sleep(0.004)  # a slow store: blocked, not on the CPU
        return torch.zeros(3)


def test_a_timed_fetch_splits_the_dataset_from_collate_and_blocked_from_cpu(tmp_path, monkeypatch):
    log = Log(str(tmp_path))
    monkeypatch.setattr(worker.STATE, "log", log)
    monkeypatch.setattr(worker.STATE, "control", None)
    monkeypatch.setattr(worker.STATE, "main_tag", "1-0")
    monkeypatch.setattr(worker.STATE, "worker", -1)
    fetcher = _MapDatasetFetcher(_Images(), True, torch.utils.data.default_collate, False)
    fetch = worker.timed_fetch(_MapDatasetFetcher.fetch)
    batch = fetch(fetcher, list(range(8)))
    assert batch.shape == (8, 3)
    assert fetcher.collate_fn is torch.utils.data.default_collate  # put back
    log.flush()
    (line,) = [r for r in _lines(tmp_path / f"p{os.getpid()}.jsonl") if r[0] == "fetch"]
    _, f = parse(json.dumps(line))
    assert f.samples == 8 and f.worker == -1
    assert f.get_wall >= 8 * 0.004
    assert f.get_wall - f.get_cpu - f.get_runq >= 8 * 0.004 * 0.9  # the sleeps: blocked
    assert 0 < f.collate_wall < f.get_wall


class _Batches:
    """An iterator of numbered batches, ``left`` of them this epoch (as a DataLoader's says)."""

    def __init__(self, n: int) -> None:
        self.n, self._num_yielded = n, 0

    def __len__(self) -> int:
        return self.n

    def next(self) -> torch.Tensor:
        if self._num_yielded >= self.n:
            raise StopIteration
        self._num_yielded += 1
        return torch.full((4,), float(self._num_yielded))


def _planned(tmp_path, plan: ControlPlan) -> tuple[Loop, Stream]:
    """A loop with ceilings and its one stream, ``plan`` the control's plan for it (as if read from
    the control file)."""
    control = Control(str(tmp_path))
    loop = Loop(Log(str(tmp_path)), control, ceilings=True)
    stream = loop.stream(("test",), lambda: {"batch_size": 4, "workers": 0})
    control.plans = {stream.tag: plan}
    control._checked = float("inf")  # the plan above is the one read
    return loop, stream


def test_after_the_window_the_loop_replays_then_the_loader_runs_alone_then_the_job_stops(tmp_path):
    loop, stream = _planned(tmp_path, ControlPlan(end=3, replay=2, alone_s=0.01))
    it = _Batches(100)
    taken = [loop.next(stream, it, _Batches.next)[0].item() for _ in range(6)]
    # three measured batches, two replayed from memory, then the loader alone drained it and handed
    # the loop its last batch
    assert taken[:5] == [1.0, 2.0, 3.0, 3.0, 2.0]
    assert taken[5] > 4.0 and it._num_yielded == taken[5]
    with pytest.raises(SystemExit) as stopped:
        loop.next(stream, it, _Batches.next)
    assert stopped.value.code == 0
    kinds = [r[0] for r in _lines(tmp_path / f"p{os.getpid()}.jsonl")]
    assert kinds.count("step") == 6 and "alone" in kinds and kinds[-1] == "stop"


def test_the_loader_alone_leaves_the_epoch_its_last_batch_and_waits_for_the_next_epoch(tmp_path):
    loop, stream = _planned(tmp_path, ControlPlan(end=1, replay=0, alone_s=10.0))
    near_end = _Batches(40)
    near_end._num_yielded = 35
    loop.next(stream, near_end, _Batches.next)
    loop.next(stream, near_end, _Batches.next)  # too near the epoch's end: a plain batch
    assert not stream.alone_done
    fresh = _Batches(40)
    loop.next(stream, fresh, _Batches.next)
    assert stream.alone_done and fresh._num_yielded == 39  # one left for the loop


def test_an_epoch_too_short_for_the_loader_alone_leaves_it_out_and_says_why(tmp_path):
    loop, stream = _planned(tmp_path, ControlPlan(end=1, replay=0, alone_s=10.0))
    short = _Batches(5)
    loop.next(stream, short, _Batches.next)
    loop.next(stream, short, _Batches.next)  # every epoch has 5 batches: never waited for
    assert stream.alone_done and short._num_yielded == 2
    loop.log.flush()
    (skip,) = [r for r in _lines(tmp_path / f"p{os.getpid()}.jsonl") if r[0] == "skip"]
    assert skip[3] == "alone" and "an epoch of 5 batches is shorter than the 12" in skip[4]


def test_a_fault_of_the_probes_own_switches_the_hooks_off_and_the_job_goes_on(tmp_path, monkeypatch):
    from iobench.probe.inject._iobench_probe import loop as loop_module

    log = Log(str(tmp_path))
    loop = Loop(log, Control(str(tmp_path)), ceilings=False)
    stream = loop.stream(("test",), lambda: {"batch_size": 4, "workers": 0})

    def broken(data, fallback):
        raise RuntimeError("a batch the probe cannot count")

    monkeypatch.setattr(loop_module, "batch_samples", broken)
    it = _Batches(10)
    assert loop.next(stream, it, _Batches.next)[0].item() == 1.0  # the job has its batch
    assert not loop.active
    (error,) = [r for r in _lines(tmp_path / f"p{os.getpid()}.jsonl") if r[0] == "error"]
    assert "a batch the probe cannot count" in error[3]


def test_a_job_stops_at_the_step_set_for_every_rank_after_its_phases(tmp_path):
    # a rank that learnt the plan late: its window ended before it read it
    loop, stream = _planned(tmp_path, ControlPlan(end=1, replay=2, alone_s=0.01, stop=8))
    it = _Batches(100_000)
    for _ in range(8):  # steps 0..7: measured, replayed, the loader alone, then real batches unrecorded
        loop.next(stream, it, _Batches.next)
    with pytest.raises(SystemExit):
        loop.next(stream, it, _Batches.next)  # step 8: every rank stops here
    assert [r[-1] for r in _lines(tmp_path / f"p{os.getpid()}.jsonl") if r[0] == "step"] == [0, 1, 1, 2]
