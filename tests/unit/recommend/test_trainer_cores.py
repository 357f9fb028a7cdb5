"""recommend keeps host cores for each accelerator's trainer and counts DALI's host CPU."""

from __future__ import annotations

import pytest

from iobench.recommend.calibrate import Calibration, Figure
from iobench.recommend.placements import options
from tests.unit.recommend.test_model import _scenario


def test_the_trainers_cores_are_kept_from_the_loaders():
    bare = {(o.name, o.decode): o for o in options(_scenario(), None)}["local NVMe", "cpu"]
    kept = {(o.name, o.decode): o for o in options(_scenario(trainer_cores=Figure(1, "test")), None)}[
        "local NVMe", "cpu"
    ]
    # 96 cores, 8 kept for the trainers: 88 x 900/s decode instead of 96 x 900/s
    assert bare.prep_samples_per_s == pytest.approx(96 * 900)
    assert kept.prep_samples_per_s == pytest.approx(88 * 900)
    assert kept.cores_needed == pytest.approx(56_000 / 900 + 8)
    assert ("host cores kept per accelerator for its trainer", Figure(1, "test")) in kept.inputs


def test_dali_counts_the_host_cpu_its_cells_measured():
    cal = Calibration(
        cells=[], collate_ms=Figure(0.05, "t"), overhead_ms=None, main_ms=None, dali_host_ms=Figure(2.0, "t")
    )
    dali = {(o.name, o.decode): o for o in options(_scenario(), cal)}["local NVMe", "dali"]
    # 96 cores at 2.0 ms per sample feed 48,000/s: below the 8 GPUs' 56,000/s
    assert dali.prep_samples_per_s == pytest.approx(48_000)
    unmeasured = {(o.name, o.decode): o for o in options(_scenario(), None)}["local NVMe", "dali"]
    said = dict(unmeasured.inputs)["host CPU of DALI's GPU decode (ms per sample)"]
    assert said.value == 0.0 and "NVIDIA/DALI#5274" in said.source
