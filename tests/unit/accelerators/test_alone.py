"""A CPU hog beside a real trainer: the step stretches against the same step alone, and the verdict
says the trainer was starved of the host (analysis/verdict.py, host_bound); the trainer alone timed
again while other processes disturb it."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from tests.helpers.paths import ROOT

# A fresh interpreter: inside a long test session the scenario once read slowdowns of 1.1-1.4 (state
# other tests leave in the process). What keeps it from reading the machine's other load instead of
# the hogs (CI once read 1.26 with two torch threads and four hogs over both CPUs):
# - the trainer (one thread) and three hogs share one CPU;
# - its step (32 images of 224 px, ~14 ms) is longer than a scheduler slice: a 2 ms step ran whole
#   between the hogs' slices, its median barely moved (1.2x), and the waits fell between steps;
# - where it may (root, as in CI), the trainer runs ahead of other processes (nice -5) and the hogs
#   ahead of it (nice -10). Read 9-12x, also beside three other spinning processes; 4x unprivileged.
SCENARIO = r"""
import json, os, subprocess, sys, time
os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
try:  # ahead of whatever else runs (as root, as in CI); the hogs further ahead of the trainer
    os.setpriority(os.PRIO_PROCESS, 0, -5)
    HOG = "import os; os.setpriority(os.PRIO_PROCESS, 0, -10)\nwhile True: pass"
except PermissionError:
    HOG = "while True: pass"
import torch
torch.set_num_threads(1)
from tests.helpers.summaries import metrics_of
from tests.helpers.summaries import judge_of
from iobench.accelerators.consumers import TorchTrainStep
from iobench.accelerators.alone import time_alone
from iobench.cell.steps.steploop import run_steps
from iobench.host.cores import usable_cores
from loaders import Batch

trainer = TorchTrainStep("small_cnn", device="cpu")
images = torch.randint(0, 256, (32, 3, 224, 224), dtype=torch.uint8)
batch = Batch(images=images, labels=torch.zeros(32, dtype=torch.int64), keys=[""] * 32)
# alone before the hogs and after them, the faster kept: a process another test left running for
# a while slows one of them, not both
before = time_alone(trainer, *trainer.h2d(images, batch.labels)[:2], min_steps=10, min_seconds=0.5)
cores = usable_cores()
hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(3)]
try:
    time.sleep(0.5)  # every hog running before the first step
    assert all(h.poll() is None for h in hogs)
    log = run_steps(lambda epoch: (batch for _ in range(30)), trainer, created_at=time.perf_counter(), warmup_steps=5)
finally:
    for h in hogs:
        h.kill()
        h.wait()
alone = min(before, time_alone(trainer, *log.last_input), key=lambda a: a.step_s)
metrics = metrics_of(log.rows, alone=alone, au_basis=trainer.au_basis)
verdict = judge_of(metrics, log.measured_stats, workers=0, cores=cores)
print(json.dumps({
    "slowdown": metrics.trainer_slowdown,
    "cpu_measured": all(r.trainer_cpu_s is not None and r.trainer_cpu_s > 0 for r in log.rows),
    "bound": verdict.bound, "headline": verdict.headline, "evidence": " ".join(verdict.evidence),
}))
"""


def _figures_of(scenario: str) -> dict:
    """The figures a scenario prints last, run in a fresh Python (its hogs and trainer its own)."""
    proc = subprocess.run(
        [sys.executable, "-c", scenario], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a real trainer beside CPU hogs, then alone: about 12 s
def test_a_cpu_hog_beside_a_real_trainer_makes_the_cell_host_bound():
    got = _figures_of(SCENARIO)
    print(f"figures: trainer slowdown {got['slowdown']:.2f} beside 3 hogs on its CPU")
    assert got["slowdown"] is not None and got["slowdown"] > 1.5
    assert got["cpu_measured"]
    assert got["bound"] == "host", got["headline"]
    assert "in the window against" in got["evidence"] and "CPU-ms per step" in got["evidence"]


class _Step:
    """A consumer whose step takes no time: what is timed is the host around it."""

    last_device_s = 0.0
    last_work_s: float | None = None
    work_sized_s: float | None = None

    def step(self, x: object, y: object) -> float:
        return 0.001


class _SizedWork(_Step):
    """An emulated trainer whose fixed work was sized to 1 ms and runs ``slowed`` times that, one
    factor per timing, on a host whose counters see no other process."""

    work_sized_s = 0.001

    def __init__(self, slowed: list[float]) -> None:
        self.slowed = slowed
        self.timings = 0

    def step(self, x: object, y: object) -> float:
        self.last_work_s = self.work_sized_s * self.slowed[min(self.timings, len(self.slowed) - 1)]
        return self.last_work_s


def _idle_host(monkeypatch, alone) -> None:
    from iobench.host.cpuload import HostCpu

    clock = iter(range(1000))
    monkeypatch.setattr(alone, "host_cpu", lambda: HostCpu(float(next(clock)), busy_s=0.0, steal_s=None))


def _timed_in_turn(monkeypatch, alone, consumer: _SizedWork) -> None:
    """Each call of the timing loop is one timing: the consumer's next factor after it."""
    timing = alone._time

    def counted(*args, **kwargs):
        try:
            return timing(*args, **kwargs)
        finally:
            consumer.timings += 1

    monkeypatch.setattr(alone, "_time", counted)


@pytest.mark.parametrize("slowed", [[1.5, 1.4, 1.02], [1.3, 1.01], [2.0, 1.0, 1.0]])
def test_fixed_work_slowed_while_the_counters_read_idle_is_timed_again_and_the_unhindered_kept(
    monkeypatch, slowed
):
    from iobench.accelerators import alone

    _idle_host(monkeypatch, alone)
    consumer = _SizedWork(slowed)
    _timed_in_turn(monkeypatch, alone, consumer)
    timed = alone.time_alone(consumer, None, None, min_steps=5, min_seconds=0.0, usable=2)
    first_unhindered = next(i for i, f in enumerate(slowed) if f < 1.15)
    assert timed.attempts == first_unhindered + 1 and timed.quiet is True
    assert timed.slowed == pytest.approx(slowed[first_unhindered])
    assert timed.step_s == pytest.approx(0.001 * slowed[first_unhindered])


def test_fixed_work_slowed_every_time_is_not_quiet_and_says_by_how_much(monkeypatch):
    from iobench.accelerators import alone
    from iobench.analysis.verdict import while_busy
    from tests.helpers.summaries import metrics

    _idle_host(monkeypatch, alone)
    consumer = _SizedWork([1.6, 1.5, 1.7])
    _timed_in_turn(monkeypatch, alone, consumer)
    timed = alone.time_alone(consumer, None, None, min_steps=5, min_seconds=0.0, usable=2)
    assert timed.attempts == alone.ATTEMPTS and timed.quiet is False
    assert timed.slowed == pytest.approx(1.5) and timed.others_cores == 0.0  # the least slowed kept
    m = replace(
        metrics(100.0),
        trainer_alone_quiet=False,
        trainer_alone_others_cores=timed.others_cores,
        trainer_alone_slowed=timed.slowed,
    )
    assert "1.50x the time it was sized to" in while_busy(m)
    busy = replace(m, trainer_alone_others_cores=1.2, trainer_alone_slowed=1.0)
    assert while_busy(busy) == "while other processes used 1.2 cores"


def test_an_emulated_trainer_knows_its_work_s_sized_time_only_where_it_sized_it_here():
    from iobench.accelerators.consumers import EmulatedAccelerator
    from iobench.accelerators.demand import Demand
    from iobench.accelerators.hostcost import given_cost

    demand = Demand(
        samples_per_s=10_000.0, accelerator="custom", model="custom", kind="custom", source="test"
    )
    host = given_cost("0.5ms x1", 32)
    trainer = EmulatedAccelerator(demand, 1, host)
    assert trainer.work_sized_s == pytest.approx(host.host_wall_s) and trainer.last_work_s is None
    labels = torch.zeros(32, dtype=torch.int64)
    trainer.step(labels, labels)
    assert trainer.last_work_s is not None and trainer.last_work_s > 0
    carried = trainer.for_count(2, host.for_trainers(2))  # its elements carried in: not sized there
    assert carried.work_sized_s is None
    assert EmulatedAccelerator(demand, 1, None).work_sized_s is None


def test_a_timing_that_other_processes_disturb_is_taken_again_and_the_quietest_kept(monkeypatch):
    from iobench.accelerators import alone
    from iobench.host.cpuload import HostCpu

    # each timing reads the host's counters before and after: other processes' cores per attempt
    others = iter([1.5, 1.5, 1.2, 1.2, 0.1, 0.1])
    clock = iter(range(100))

    def fake_host_cpu() -> HostCpu:
        t = float(next(clock))
        return HostCpu(t, busy_s=t * next(others), steal_s=None)

    monkeypatch.setattr(alone, "host_cpu", fake_host_cpu)
    timed = alone.time_alone(_Step(), None, None, min_steps=5, min_seconds=0.0, usable=2)
    assert timed.attempts == 3 and timed.quiet is True
    assert timed.step_low_s is not None and timed.step_low_s <= timed.step_s <= timed.step_high_s


def test_a_host_busy_every_time_keeps_the_least_disturbed_and_says_it_was_not_quiet(monkeypatch):
    from iobench.accelerators import alone
    from iobench.host.cpuload import HostCpu

    clock = iter(range(100))

    def busy() -> HostCpu:
        t = float(next(clock))
        return HostCpu(t, busy_s=t * 1.4, steal_s=None)

    monkeypatch.setattr(alone, "host_cpu", busy)
    timed = alone.time_alone(_Step(), None, None, min_steps=5, min_seconds=0.0, usable=2)
    assert timed.attempts == alone.ATTEMPTS and timed.quiet is False and timed.others_cores > 0.5


def test_a_quiet_host_has_cores_to_spare_or_next_to_no_others():
    from iobench.accelerators.alone import median_interval
    from iobench.host.cpuload import quiet

    assert quiet(0.2, 1.0, 2) and not quiet(1.0, 0.6, 2)
    assert quiet(3.0, 1.0, 16)  # a large host's background leaves the trainer its cores
    low, high = median_interval([float(x) for x in range(1, 101)])
    assert low < 50.5 < high and high - low < 25


HOGGED = r"""
import json, subprocess, sys, time
import torch
torch.set_num_threads(1)
from iobench.accelerators.alone import time_alone
from iobench.accelerators.consumers import TorchTrainStep
from iobench.host.cores import usable_cores
hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(2, usable_cores()))]
try:
    time.sleep(0.5)
    trainer = TorchTrainStep("small_cnn", device="cpu")
    images = torch.randint(0, 256, (16, 3, 64, 64), dtype=torch.uint8)
    x, y, _ = trainer.h2d(images, torch.zeros(16, dtype=torch.int64))
    alone = time_alone(trainer, x, y, min_steps=5, min_seconds=0.3)
finally:
    for h in hogs:
        h.kill()
        h.wait()
print(json.dumps({"quiet": alone.quiet, "others": alone.others_cores, "attempts": alone.attempts}))
"""


@pytest.mark.slow  # a real trainer timed alone beside CPU hogs: about 5 s
def test_a_trainer_alone_timed_beside_cpu_hogs_says_the_host_was_busy_and_is_not_judged():
    got = _figures_of(HOGGED)
    print(f"figures: other processes used {got['others']:.2f} cores over {got['attempts']} timing(s)")
    assert got["quiet"] is False and got["others"] > 1.0 and got["attempts"] == 3
