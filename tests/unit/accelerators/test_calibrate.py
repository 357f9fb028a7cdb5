"""`iobench calibrate` (accelerators/calibrate.py, accelerators/cli.py): a real step alone, kept where sweeps read it."""

from __future__ import annotations

import pytest
import torch

from iobench.accelerators import hostcost
from iobench.cli import main


@pytest.mark.slow  # a real model's steps alone and its host work sized beside them: ~10 s
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a host without CUDA")
def test_calibrate_for_cuda_without_it_measures_the_cpu_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path))
    assert main(["calibrate", "--model", "small_cnn", "--device", "cuda", "--batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "no CUDA device here: measured small_cnn on the CPU instead" in " ".join(out.split())
    (cost,) = hostcost.load_calibrations()
    assert cost.device == "cpu" and cost.device_s is None and cost.kind == "calibration"
    assert cost.step_alone_s > 0 and cost.cpu_s_per_step > 0 and cost.ops_per_step > 5
    assert cost.threads == torch.get_num_threads()
    # each operator's share of the step, and the emulated host work sized beside the step
    assert len(cost.op_shares) == cost.ops_per_step and sum(cost.op_shares) == pytest.approx(1.0)
    assert max(cost.op_shares) > 2 / cost.ops_per_step  # a few operators hold most of the step
    assert cost.elements_per_step > 0
    assert hostcost.host_cost("small_cnn", 4).kind == "calibration"
    # the step's spread alone, kept for compute: {cv: calibrated}
    # (its size is the host's: a loaded 2-core host measured cv 1.25 for this tiny model)
    assert cost.step_cv is not None and cost.step_cv > 0 and "step spread alone: cv" in out


def test_calibrate_refuses_an_empty_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path))
    assert main(["calibrate", "--model", "small_cnn", "--batch-size", "0"]) == 2
    assert hostcost.load_calibrations() == []
