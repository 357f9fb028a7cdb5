"""A CPU hog beside a real trainer: the step stretches against the same step alone, and the verdict
says the trainer was starved of the host (analysis/verdict.py, host_bound)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT

# run in a fresh interpreter: inside a long test session the same scenario read slowdowns of
# 1.1-1.4 (state other tests leave in the process), alone 5-8x
SCENARIO = r"""
import json, os, subprocess, sys, time
import torch
from iobench.analysis.metrics import compute_metrics
from iobench.analysis.verdict import attribute
from iobench.cell.accelerator import TorchTrainStep
from iobench.cell.alone import time_alone
from iobench.cell.steploop import run_steps
from iobench.host.cores import usable_cores
from loaders import Batch

trainer = TorchTrainStep("small_cnn", device="cpu")
images = torch.randint(0, 256, (16, 3, 112, 112), dtype=torch.uint8)
batch = Batch(images=images, labels=torch.zeros(16, dtype=torch.int64), keys=[""] * 16)
# alone before the hogs and after them, the faster kept: a process another test left running for
# a while slows one of them, not both
before = time_alone(trainer, *trainer.h2d(images, batch.labels)[:2], min_steps=10, min_seconds=0.5)
cores = usable_cores()
hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * cores)]
try:
    time.sleep(0.5)  # every hog running before the first step
    assert all(h.poll() is None for h in hogs)
    log = run_steps(lambda epoch: (batch for _ in range(80)), trainer, created_at=time.perf_counter(), warmup_steps=5)
finally:
    for h in hogs:
        h.kill()
        h.wait()
alone = min(before, time_alone(trainer, *log.last_input), key=lambda a: a.step_s)
metrics = compute_metrics(log.rows, alone=alone, au_basis=trainer.au_basis, loader_cpu_s=0.0)
verdict = attribute(metrics, log.measured_stats, workers=0, cores=cores, demand_samples_per_s=None)
print(json.dumps({
    "slowdown": metrics.trainer_slowdown,
    "cpu_measured": all(r.trainer_cpu_s is not None and r.trainer_cpu_s > 0 for r in log.rows),
    "bound": verdict.bound, "headline": verdict.headline, "evidence": " ".join(verdict.evidence),
}))
"""


@pytest.mark.slow  # a real trainer beside CPU hogs, then alone: 10-30 s on 2 cores
def test_a_cpu_hog_beside_a_real_trainer_makes_the_cell_host_bound():
    proc = subprocess.run(
        [sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"figures: trainer slowdown {got['slowdown']:.2f} beside 2 hogs per core")
    assert got["slowdown"] is not None and got["slowdown"] > 1.5
    assert got["cpu_measured"]
    assert got["bound"] == "host", got["headline"]
    assert "in the cell against" in got["evidence"] and "CPU-ms per step" in got["evidence"]
