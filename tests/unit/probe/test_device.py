"""The device's side of the hooks on a stand-in for torch.cuda (this host has no GPU): a step's span
runs from the batch handed over to the loop's next call, is read only once its end event has passed
(no synchronisation), and copies are recorded only from the CPU to a device once CUDA is up."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from iobench.probe.inject._iobench_probe import device
from iobench.probe.inject._iobench_probe.log import Log


class FakeEvent:
    clock = 0.0  # the device's clock, in ms, moved by the test

    def __init__(self, enable_timing: bool = True) -> None:
        self.at: float | None = None
        self.passed = False
        self.synchronized = False

    def record(self) -> None:
        self.at = FakeEvent.clock

    def query(self) -> bool:
        return self.passed

    def synchronize(self) -> None:
        self.synchronized = self.passed = True

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.at - self.at


def fake_torch(initialized: bool = True) -> SimpleNamespace:
    return SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: initialized, Event=FakeEvent))


def _records(tmp_path, kind: str) -> list[list]:
    path = tmp_path / f"p{os.getpid()}.jsonl"
    return (
        [r for r in map(json.loads, path.read_text().splitlines()) if r[0] == kind] if path.exists() else []
    )


def test_a_steps_span_is_read_once_its_end_has_passed_and_never_waited_for(tmp_path):
    log = Log(str(tmp_path))
    clock = device.DeviceClock(log, fake_torch())
    stream = SimpleNamespace(tag="1-0", device_open=None)
    clock.on_call(stream)  # the first call: nothing launched yet
    FakeEvent.clock = 10.0
    clock.on_return(stream, 0)  # batch 0 handed over at 10 ms
    FakeEvent.clock = 35.0
    clock.on_call(stream)  # the loop asks again: step 0 launched up to here
    end = clock.pending[0][3]
    assert not end.synchronized
    log.flush()
    assert _records(tmp_path, "device") == []  # not passed yet: not read
    end.passed = True
    clock.poll()
    log.flush()
    assert _records(tmp_path, "device") == [["device", "1-0", 0, 0.025]]
    assert clock.spare  # the events are used again


def test_without_cuda_initialised_by_the_job_nothing_is_recorded(tmp_path):
    log = Log(str(tmp_path))
    clock = device.DeviceClock(log, fake_torch(initialized=False))
    stream = SimpleNamespace(tag="1-0", device_open=None)
    clock.on_call(stream)
    clock.on_return(stream, 0)
    assert stream.device_open is None and not clock.pending


class FakeTensor:
    def __init__(self, where: str) -> None:
        self.device = SimpleNamespace(type=where)
        self.nbytes = 1024

    def to(self, where: str, non_blocking: bool = False) -> FakeTensor:
        return FakeTensor(where)


def test_copies_from_the_cpu_to_a_device_are_recorded_once_cuda_is_up(tmp_path, monkeypatch):
    log = Log(str(tmp_path))
    monkeypatch.setattr(device, "_LOG", [log])
    to = device.timed_copy(FakeTensor.to)
    monkeypatch.setattr(device, "_ON", [False])
    to(FakeTensor("cpu"), "cuda")  # before the job initialised CUDA: not timed
    monkeypatch.setattr(device, "_ON", [True])
    to(FakeTensor("cpu"), "cuda", non_blocking=True)
    to(FakeTensor("cpu"), "cpu")  # a conversion on the host
    to(FakeTensor("cuda"), "cuda")  # already there
    log.flush()
    ((_, t0, t1, size, non_blocking),) = _records(tmp_path, "h2d")
    assert t1 >= t0 and size == 1024 and non_blocking is True
