"""A probe's records become a run directory that iobench's readers read: its steps with the step
loop's meanings, the metrics of iobench's own analysis, the ceilings and the sweep file."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest
import yaml
from rich.console import Console

from iobench.analysis import decoderate
from iobench.probe.command import JobCommand
from iobench.probe.measure import rank_runs
from iobench.probe.outcome import Outcome
from iobench.probe.publish import publish
from iobench.probe.reader import Follower
from iobench.probe.sweepfile import sweep_config, write_sweep_file
from iobench.report.terminal import print_report
from iobench.results.api import load_run, load_summaries
from iobench.results.spec import MinMeasure
from iobench.sweep.config import parse_config
from tests.unit.probe.jobkit import Loop, record


def outcome_of(
    tmp_path, loop: Loop, *, end: int | None = 50, ceilings: bool = True, exit_code: int | None = 0
) -> Outcome:
    records = tmp_path / "records"
    records.mkdir()
    job = Follower(loop.write(records)).read()
    runs = tuple(rank_runs(job, end, {loop.tag: 5} if end else {}))
    return Outcome(
        command=("python", "train.py"),
        name="train",
        runs=runs,
        least=MinMeasure(steps=40, seconds=30.0, need="either"),
        ceilings=ceilings,
        exit_code=exit_code,
        short_because=None if end else "the job's end",
        cores=2,
        cuda=False,
        torch_version="2.13.0",
        started_at="2026-12-06T00:00:00+00:00",
        seen="",
    )


def test_a_fetch_bound_loop_is_a_run_directory_with_its_own_numbers(tmp_path):
    # 2 workers, each batch blocked 100 ms of its 120: the loop waits 50 ms, steps 10 ms
    loop = Loop(steps=60, workers=2, wait=0.05, step=0.01, make=0.12, cpu=0.02, replayed=12)
    out = tmp_path / "run"
    summary = publish(out, outcome_of(tmp_path, loop))
    assert summary.ok and summary.verdict.bound == "fetch"
    m = summary.metrics
    assert m.steps == 45
    assert m.samples_per_s == pytest.approx(16 / 0.06, rel=1e-6)
    assert m.stall_fraction == pytest.approx(0.05 / 0.06, rel=1e-6)
    assert m.au == pytest.approx(0.01 / 0.06, rel=1e-6)  # on the CPU the step is the device's time
    assert summary.split is not None and sum(summary.split.parts().values()) == pytest.approx(1.0)
    assert summary.split.handover == pytest.approx(
        0.002 / 0.06, rel=1e-3
    )  # ready 2 ms before the loop had it
    assert summary.ceilings is not None and summary.ceilings.accelerator is not None
    assert summary.ceilings.accelerator.samples_per_s == pytest.approx(16 / 0.005, rel=1e-6)
    steps = pq.read_table(out / summary.cell_id / "steps.parquet").to_pylist()
    assert [r["wait_s"] for r in steps[5:8]] == pytest.approx([0.05] * 3)
    assert [r["compute_s"] for r in steps[5:8]] == pytest.approx([0.01] * 3)
    assert steps[6]["reader"] == 0 and steps[7]["reader"] == 1
    assert steps[6]["ready_s"] == pytest.approx(steps[6]["t_start"] + 0.05 - 0.002)
    assert sum(r["warmup"] for r in steps) == 5
    # what report, compare and recommend read
    table = load_run(out)
    assert table.column("verdict").to_pylist() == ["fetch"]
    assert table.column("accelerator_ceiling").to_pylist()[0] == pytest.approx(3200.0)
    (again,) = load_summaries(out)
    text = io.StringIO()
    print_report([again], Console(file=text, width=200))
    assert "fetch-bound" in text.getvalue()


def test_a_job_that_ended_first_keeps_what_it_measured_and_says_the_window_is_short(tmp_path):
    loop = Loop(steps=20, workers=1)
    summary = publish(tmp_path / "run", outcome_of(tmp_path, loop, end=None, ceilings=True, exit_code=1))
    assert summary.ok
    assert not summary.window.met and summary.window.short_because == "the job's end"
    assert "treat the figures as indicative" in summary.verdict.headline
    assert summary.ceilings is None
    said = " ".join(summary.warnings)
    assert "the step alone was not measured: the job ended" in said and "a lower --steps" in said
    assert "the loader alone was not measured: the job ended before it ran" in said


def test_a_loader_alone_left_out_says_why(tmp_path):
    loop = Loop(steps=60, workers=2, replayed=12)
    loop.records.setdefault(loop.pid, []).append(
        record(
            "skip", tag=loop.tag, t=200.0, phase="alone", why="an epoch of 8 batches is shorter than the 16"
        )
    )
    summary = publish(tmp_path / "run", outcome_of(tmp_path, loop))
    said = " ".join(summary.warnings)
    assert "the loader alone was not measured: an epoch of 8 batches is shorter than the 16" in said


def test_nothing_measured_is_a_failed_cell_that_says_what_was_seen(tmp_path):
    outcome = outcome_of(tmp_path, Loop(steps=0), end=None)
    outcome = Outcome(
        **{**outcome.__dict__, "runs": (), "seen": "torch was imported, but no DataLoader was iterated"}
    )
    summary = publish(tmp_path / "run", outcome)
    assert summary.status == "failed" and "no DataLoader" in summary.error
    assert load_run(tmp_path / "run").column("verdict").to_pylist() == ["failed"]


def test_the_sweep_file_reproduces_the_loader_and_its_store_and_is_a_sweep_iobench_reads(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("IOBENCH_CACHE", str(tmp_path / "cache"))  # no calibration: the assumed decode rate
    loop = Loop(steps=60, workers=2, make=0.12, cpu=0.02, batch=16, replayed=12)
    outcome = outcome_of(tmp_path, loop)
    config = sweep_config(outcome, tmp_path / "dataset")
    # the readers' CPU per sample (20 ms a batch of 16) beyond this host's decode and augment of a
    # 100 kB JPEG, as the loader's extra augment CPU
    extra = round(1000 * 0.02 / 16 - decoderate.resolve().ms_per_sample(100_000), 2)
    assert extra > 0
    assert config["loaders"] == [
        {"kind": "torch", "workers": [2], "batch_size": [16], "prefetch": 2, "decode_cpu_ms": extra}
    ]
    (throttled,) = [t for t in config["tiers"] if t["kind"] == "throttled"]
    # 2 readers x 100 kB a sample, each sample blocked 99 ms / 16 (a batch of 16 blocked 99 ms)
    assert float(throttled["bandwidth"].removesuffix("MB/s")) == pytest.approx(
        2 * 0.1 / (0.099 / 16), rel=1e-3
    )
    assert config["accelerators"][0]["samples_per_s"] == pytest.approx(3200.0, rel=1e-3)
    # the trainer's own CPU per step (its process's, 4 ms call to call in the records) as host work
    assert config["accelerators"][0]["host_work"] == "4ms x1"
    assert config["run"]["max_steps"] == 500  # one epoch (10,000 / 16) at most 500: a throttled epoch is long
    path = write_sweep_file(outcome, tmp_path / "sweep.yaml", tmp_path / "dataset")
    text = path.read_text()
    assert text.startswith("# The loader of `python train.py`")
    assert (
        f"# and spends decode_cpu_ms: {extra:g} more CPU ms per sample" in text
        and "the job's 1.25 ms less" in text
    )
    assert "as its host work" in text and "Not carried: the job's model" in text
    parsed = parse_config(yaml.safe_load(text), str(path))
    assert [t["kind"] for t in parsed.tiers] == ["local", "throttled"]
    assert parsed.loaders[0].settings.decode_cpu_ms == extra
    # synthetic samples the size the job's readers read (100 kB), within what the generator makes
    assert config["dataset"] == {"synth": {"samples": 10_000, "sample_size": "100000B"}}
    assert parsed.datasets[0].synth_jpeg_bytes == 100_000
    assert "# of 97.7 KiB a sample, where the job read 97.7 KiB a sample." in text


def test_a_job_whose_samples_the_generator_cannot_make_gets_the_nearest_and_is_told(tmp_path):
    outcome = outcome_of(tmp_path, Loop(steps=60, workers=2, make=0.02, cpu=0.018, bytes_per_sample=2_000))
    assert sweep_config(outcome, tmp_path)["dataset"]["synth"]["sample_size"] == f"{56 * 1024}B"
    text = write_sweep_file(outcome, tmp_path / "sweep.yaml", tmp_path / "dataset").read_text()
    assert "where the job read 1.95 KiB a sample (the nearest the generator makes: 56-180 KiB)." in text


def test_a_store_the_workers_hardly_waited_on_is_not_reproduced(tmp_path):
    outcome = outcome_of(tmp_path, Loop(steps=60, workers=2, make=0.02, cpu=0.018))
    assert [t["kind"] for t in sweep_config(outcome, tmp_path)["tiers"]] == ["local"]


def test_the_command_is_said_as_given():
    assert JobCommand(("python", "train.py"), "train").argv == ("python", "train.py")
