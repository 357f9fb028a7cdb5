"""The terminal (and HTML) report's lines on the trainer's host (report/terminal.py)."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from iobench.report.terminal import at_scale_line, print_report, trainer_lines
from iobench.results.figures import ScalePoint, StepAlone, StepRow
from tests.helpers.summaries import metrics_of, ok_summary


def _real_cell():
    rows = [
        StepRow(
            i, 0, False, 0.3 * i, 0.0, 0.0, 0.3, 0.3 * (i + 1), 64, 1000, device_s=0.3, trainer_cpu_s=0.45
        )
        for i in range(10)
    ]
    metrics = metrics_of(
        rows, alone=StepAlone(0.1, 0.1, None, 0.2, 5), au_basis="CPU step (the host is the device)"
    )
    s = ok_summary("disk-torch-w2", 213.0, bound="host", binding_stage=None)
    return replace(s, metrics=metrics, consumer={"kind": "torch", "model": "small_cnn"})


def test_a_real_cell_names_the_trainers_slowdown_and_what_au_divides():
    lines = trainer_lines(_real_cell())
    assert lines[0] == "AU = the device busy (CPU step (the host is the device)) / wall"
    assert lines[1] == (
        "trainer: its step took 300.0 ms (median) in the cell against 100.0 ms alone: slowdown 3.00x; "
        "the trainer used 450.0 CPU-ms per step of its own"
    )
    console = Console(record=True, width=200)
    print_report([_real_cell()], console, detail=True)
    assert "slowdown 3.00x" in console.export_text()


def test_gpu_utilisation_and_an_emulated_trainers_host_work_are_said():
    s = replace(
        _real_cell(),
        gpu_utilization_pct=16.0,
        consumer={"kind": "emulated", "host_work": "resnet50 on cuda, batch 256: 20.0 CPU-ms per step"},
    )
    lines = trainer_lines(s)
    assert "GPU utilisation (NVML, mean over the window): 16 %" in lines
    assert "emulated trainer's host work per step: resnet50 on cuda, batch 256: 20.0 CPU-ms per step" in lines


def test_the_prediction_at_scale_says_the_cores_a_rank_used_that_ranks_sharing_a_host_each_need():
    s = _real_cell()  # 10 steps in 3 s of wall, 450 CPU-ms per step: the trainer used 1.5 cores
    metrics = replace(s.metrics, loader_cores=0.3)
    point = ScalePoint(
        world_size=8,
        au=0.5,
        samples_per_s=1000.0,
        step_s=0.5,
        data_wait_s=0.1,
        allreduce_s=0.0,
        au_low=0.4,
        au_high=0.6,
    )
    line = at_scale_line(replace(s, metrics=metrics, scale=(point,)))
    assert line is not None
    assert line.endswith(
        "a rank used 1.80 cores here (its loader's readers 0.30, its trainer 1.50): ranks that share a host "
        "need as many each, or they slow each other and these AUs are high"
    )
