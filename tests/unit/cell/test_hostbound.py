"""A CPU hog beside a real trainer: the step stretches against the same step alone, and the verdict
says the trainer was starved of the host (analysis/verdict.py, host_bound)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from iobench.analysis.metrics import compute_metrics
from iobench.analysis.verdict import attribute
from iobench.cell.accelerator import TorchTrainStep
from iobench.cell.alone import time_alone
from iobench.cell.steploop import run_steps
from iobench.host.cores import usable_cores
from loaders import Batch


@pytest.mark.slow  # a real trainer beside CPU hogs, then alone: 10-30 s on 2 cores
def test_a_cpu_hog_beside_a_real_trainer_makes_the_cell_host_bound():
    trainer = TorchTrainStep("small_cnn", device="cpu")
    images = torch.randint(0, 256, (16, 3, 112, 112), dtype=torch.uint8)
    batch = Batch(images=images, labels=torch.zeros(16, dtype=torch.int64), keys=[""] * 16)
    time_alone(trainer, *trainer.h2d(images, batch.labels)[:2], min_steps=3, min_seconds=0.0)  # warm
    cores = usable_cores()
    # the trainer and the hogs share one core, so the contention does not depend on the scheduler's
    # spreading or on what the rest of a test session left running (on two free cores a short run
    # inside the whole suite read a slowdown of 1.4)
    core, saved_affinity, saved_threads = (
        min(os.sched_getaffinity(0)),
        os.sched_getaffinity(0),
        torch.get_num_threads(),
    )
    os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    hog = f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    try:
        hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(4)]
        try:
            time.sleep(0.5)  # every hog running before the first step
            log = run_steps(
                lambda epoch: (batch for _ in range(60)),
                trainer,
                created_at=time.perf_counter(),
                warmup_steps=5,
            )
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        assert log.last_input is not None
        alone = time_alone(trainer, *log.last_input)  # on the same core, now free
    finally:
        os.sched_setaffinity(0, saved_affinity)
        torch.set_num_threads(saved_threads)
    metrics = compute_metrics(log.rows, alone=alone, au_basis=trainer.au_basis, loader_cpu_s=0.0)
    verdict = attribute(metrics, log.measured_stats, workers=0, cores=cores, demand_samples_per_s=None)
    print(f"figures: trainer slowdown {metrics.trainer_slowdown:.2f} beside 4 hogs on its core")
    assert metrics.trainer_slowdown is not None and metrics.trainer_slowdown > 1.5
    assert all(r.trainer_cpu_s is not None and r.trainer_cpu_s > 0 for r in log.rows)
    assert verdict.bound == "host", verdict.headline
    said = " ".join(verdict.evidence)
    assert "in the cell against" in said and "CPU-ms per step" in said
