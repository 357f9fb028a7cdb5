"""The emulated trainer's host work (accelerators/hostwork.py) and the emulated accelerator that runs it."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import torch

from iobench.accelerators.consumers import EmulatedAccelerator, emulated_host_cost
from iobench.accelerators.demand import Demand
from iobench.accelerators.hostcost import HostCost
from iobench.results.spec import AcceleratorSpec


def _cost(cpu_ms: float, threads: int = 1) -> HostCost:
    return HostCost("small_cnn", "cpu", 8, cpu_ms / 1000, cpu_ms / 1000, threads, 10, None, "test", "default")


def test_the_host_work_is_a_fixed_amount_of_work_not_a_time():
    from iobench.accelerators.hostwork import HostWork, regions

    # a calibration's size is taken as it is: no probe, exactly its elements, cut in its shares
    sized = HostWork(replace(_cost(60.0), elements_per_step=1_000_000))
    assert sized.sizes == regions(1_000_000, sized.cost.shares)
    c0 = time.process_time()
    sized.run()
    assert time.process_time() - c0 > 0  # it does the work (how long it takes is a benchmark's)


def test_host_work_longer_than_the_device_time_stretches_the_step():
    y = torch.zeros(8)
    sleeper = EmulatedAccelerator(Demand("x", "m", "custom", 8 / 0.005, "test"))
    worker = EmulatedAccelerator(Demand("x", "m", "custom", 8 / 0.005, "test"), host=_cost(60.0))
    slept = min(sleeper.step(y, y) for _ in range(3))
    worked = min(worker.step(y, y) for _ in range(3))
    assert slept < 0.02 < 0.03 < worked
    assert worker.last_device_s == 0.005  # the device idled while the host worked
    assert "small_cnn" in worker.describe()["host_work"]
    assert sleeper.describe()["host_work"].startswith("none")


def test_an_emulated_accelerator_does_its_own_models_host_work_but_not_in_mlperf_mode():
    acc = AcceleratorSpec("emulated", "h100", "resnet50", "training", 1)
    assert emulated_host_cost(acc, 256).model == "resnet50"
    assert (
        emulated_host_cost(AcceleratorSpec("emulated", "h100", "resnet50", "mlperf_storage", 1), 256) is None
    )
    assert (
        emulated_host_cost(
            AcceleratorSpec("emulated", "h100", "resnet50", "training", 1, host_work="none"), 8
        )
        is None
    )
    small = emulated_host_cost(
        AcceleratorSpec("emulated", "h100", "resnet50", "training", 1, host_work="small_cnn"), 8
    )
    assert small.model == "small_cnn" and small.batch_size == 8


def test_a_default_host_cost_is_said_in_the_cells_notes():
    from iobench.accelerators.hostcost import default_cost
    from iobench.cell.entry.shared import host_work_warnings

    acc = EmulatedAccelerator(Demand("x", "m", "custom", 1e6, "test"), host=default_cost("resnet50"))
    (said,) = host_work_warnings(acc)
    assert "host work of resnet50: not calibrated on this host, so the documented default" in said
    assert "`iobench calibrate --model resnet50`" in said
    assert host_work_warnings(EmulatedAccelerator(Demand("x", "m", "custom", 1e6, "test"))) == []


def test_the_work_is_sized_on_whole_steps_of_it(monkeypatch):
    from iobench.accelerators import hostwork

    # an operator that costs 1 ns per element when probed; the timed steps run at half that speed
    def probe(sizes) -> float:
        return sum(sizes) * 1e-9

    def step(self) -> float:
        return sum(src.numel() for src, _ in self.views) * 2e-9

    monkeypatch.setattr(hostwork, "work_seconds", probe)
    monkeypatch.setattr(hostwork._Operators, "run", step)
    # 36 ms of the real step: 36 M elements at the probe's speed, 18 M at the speed the steps ran
    assert hostwork.elements_for(0.036, (0.5, 0.25, 0.25), blocks=3) == pytest.approx(18_000_000, abs=2)


def test_the_work_is_sized_on_its_fastest_step_over_half_a_second(monkeypatch):
    from iobench.accelerators import hostwork

    # 20 ms of work at 1 ns per element; the first ten timed steps (0.3 s) meet a spell that runs
    # the work at 1.5x: the steps after it show what the work takes
    spell = iter([1.5] * 10)

    def step(self) -> float:
        return sum(src.numel() for src, _ in self.views) * 1e-9 * next(spell, 1.0)

    monkeypatch.setattr(hostwork, "work_seconds", lambda sizes: sum(sizes) * 1e-9)
    monkeypatch.setattr(hostwork._Operators, "run", step)
    assert hostwork.elements_for(0.020, (1.0,), blocks=5) == pytest.approx(20_000_000, abs=2)
    # timed over only its 5 blocks, all in the spell, the work would come out a third light
    spell = iter([1.5] * 10)
    assert hostwork.elements_for(0.020, (1.0,), blocks=5, at_least_s=0.0) == pytest.approx(13_333_333, abs=2)


def test_the_work_is_cut_in_the_real_steps_shares():
    from iobench.accelerators.hostwork import MAX_ELEMENTS, HostWork, regions

    work = HostWork(replace(_cost(30.0), op_shares=(0.6, 0.3, 0.1), elements_per_step=10_000))
    assert work.sizes == [6000, 3000, 1000]
    # no shares measured (a documented default): ops_per_step equal ones
    assert HostWork(replace(_cost(30.0), elements_per_step=1000)).sizes == [100] * 10
    # an operator over the limit becomes several of the same work; the smallest keeps an element
    assert regions(3 * MAX_ELEMENTS, (1.0, 1e-9)) == [MAX_ELEMENTS] * 3 + [1]
    assert regions(3 * MAX_ELEMENTS + 3, (1.0,)) == [MAX_ELEMENTS * 3 // 4 + 1] * 4


def test_a_count_of_emulated_accelerators_does_as_many_trainers_host_work():
    one = emulated_host_cost(AcceleratorSpec("emulated", "h100", "resnet50", "training", 1), 256)
    eight = emulated_host_cost(AcceleratorSpec("emulated", "h100", "resnet50", "training", 8), 256)
    assert eight.threads == 8 * one.threads and eight.cpu_s_per_step == pytest.approx(8 * one.cpu_s_per_step)
    assert eight.host_wall_s == pytest.approx(one.host_wall_s)  # alone, where the cores suffice
    # on CPU each trainer steps on its share of the batch: the same work in all
    cpu = AcceleratorSpec("emulated", "h100", "resnet50", "training", 2, host_work="small_cnn")
    two = emulated_host_cost(cpu, 64)
    assert two.batch_size == 32 and two.cpu_s_per_step == pytest.approx(
        emulated_host_cost(replace(cpu, count=1), 64).cpu_s_per_step
    )
