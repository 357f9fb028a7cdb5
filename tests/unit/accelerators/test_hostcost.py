"""This host's trainer calibrations and the documented defaults (accelerators/hostcost.py)."""

from __future__ import annotations

import pytest

from iobench.accelerators import hostcost
from iobench.accelerators.hostcost import HostCost, default_cost, host_cost


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path))


def _cost(device: str = "cpu", batch: int = 64, cpu_ms: float = 50.0) -> HostCost:
    return HostCost("small_cnn", device, batch, 0.025, cpu_ms / 1000, 2, 49, None, "test", "calibration")


def test_an_uncalibrated_model_takes_the_documented_default():
    cost = host_cost("resnet50", 256)
    assert cost.kind == "default" and cost.device == "cuda"
    assert cost.cpu_s_per_step == pytest.approx(0.020) and "one H200" in cost.source


def test_a_calibration_replaces_the_default_and_the_previous_one():
    hostcost.keep_host_cost(_cost(cpu_ms=80))
    hostcost.keep_host_cost(_cost(cpu_ms=50))
    (kept,) = hostcost.load_calibrations()
    assert kept.cpu_s_per_step == pytest.approx(0.050)
    assert host_cost("small_cnn", 64).kind == "calibration"


def test_a_cuda_calibration_is_preferred_and_kept_per_step_at_other_batches():
    hostcost.keep_host_cost(_cost("cpu", 64))
    hostcost.keep_host_cost(_cost("cuda", 256, cpu_ms=20))
    cost = host_cost("small_cnn", 64)
    assert cost.device == "cuda" and cost.cpu_s_per_step == pytest.approx(0.020)
    assert host_cost("small_cnn", 64, device="cpu").device == "cpu"


def test_a_cpu_cost_scales_with_the_batch():
    from dataclasses import replace

    # the same operators, each twice the work: the cut is what sets how the step stretches
    scaled = replace(_cost("cpu", 64), elements_per_step=1000, op_shares=(0.75, 0.25)).at_batch(128)
    assert (scaled.elements_per_step, scaled.shares) == (2000, (0.75, 0.25))
    cost = _cost("cpu", 64).at_batch(128)
    assert cost.cpu_s_per_step == pytest.approx(0.100) and cost.step_alone_s == pytest.approx(0.050)
    assert "scaled from batch 64 to 128" in cost.source


def test_an_older_calibration_file_keeps_what_is_still_read_and_is_carried_into_the_store(tmp_path):
    import json
    from dataclasses import asdict

    from iobench.host import calibrations

    entry = {**asdict(_cost()), "elements_per_op": 1000, "ops_per_run": 49}
    earlier = tmp_path / calibrations.EARLIER_FILES["trainer_host"]
    earlier.write_text(json.dumps({"calibrations": [entry]}))
    (kept,) = hostcost.load_calibrations()
    assert kept.cpu_s_per_step == pytest.approx(0.050) and kept.elements_per_step is None
    hostcost.keep_host_cost(_cost("cuda", 256, cpu_ms=20))
    earlier.unlink()
    assert sorted(c.device for c in hostcost.load_calibrations()) == ["cpu", "cuda"]


def test_an_unreadable_calibration_file_falls_back_to_the_default(tmp_path):
    from iobench.host import calibrations

    calibrations.store_path().write_text("{not json")
    assert host_cost("small_cnn", 64).kind == "default"


def test_a_model_without_a_default_names_those_with_one():
    with pytest.raises(ValueError, match="resnet50"):
        default_cost("vit")
