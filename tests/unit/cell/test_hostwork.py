"""The emulated trainer's host work (cell/hostwork.py) and the emulated accelerator that runs it."""

from __future__ import annotations

import time

import torch

from iobench.cell.accelerator import EmulatedAccelerator, emulated_host_cost
from iobench.cell.demand import Demand
from iobench.cell.hostcost import HostCost
from iobench.results.spec import AcceleratorSpec


def _cost(cpu_ms: float, threads: int = 1) -> HostCost:
    return HostCost("small_cnn", "cpu", 8, cpu_ms / 1000, cpu_ms / 1000, threads, 10, None, "test", "default")


def test_the_host_work_uses_about_the_calibrated_cpu():
    from iobench.cell.hostwork import HostWork

    work = HostWork(_cost(60.0))
    work.run()
    c0 = time.process_time()
    work.run()
    used = time.process_time() - c0
    # fixed work, sized on an idle probe: a busy host can only make it cost more
    assert 0.5 * 0.060 <= used <= 3 * 0.060


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
    from iobench.cell.files import host_work_warnings
    from iobench.cell.hostcost import default_cost

    acc = EmulatedAccelerator(Demand("x", "m", "custom", 1e6, "test"), host=default_cost("resnet50"))
    (said,) = host_work_warnings(acc)
    assert "host work of resnet50: not calibrated on this host, so the documented default" in said
    assert "`iobench calibrate --model resnet50`" in said
    assert host_work_warnings(EmulatedAccelerator(Demand("x", "m", "custom", 1e6, "test"))) == []


def test_the_work_is_cut_into_at_least_the_steps_operators_each_held_in_the_caches():
    from iobench.cell.hostwork import MAX_ELEMENTS, plan

    # 36.6 ms in 67 operators at 0.5 ns per element: 0.55 ms each would be 1.1 M elements, so the
    # operators are capped at MAX_ELEMENTS and there are more of them
    elements, calls = plan(0.0366, 67, 0.5e-9)
    assert elements == MAX_ELEMENTS and calls == round(0.0366 / (MAX_ELEMENTS * 0.5e-9)) > 67
    # 20 ms in 500 operators: 40 µs each, 80,000 elements
    assert plan(0.020, 500, 0.5e-9) == (80_000, 500)
