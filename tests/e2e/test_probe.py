"""`iobench probe -- python job.py` end to end on small plain PyTorch jobs written here: the job's own
output and exit code pass through, its verdict and ceilings land in a run directory the report reads,
workers started by spawn are reached, and a job that crashes, never iterates a DataLoader or is not
Python is answered in words."""

from __future__ import annotations

import sys
import textwrap

import pytest

from iobench.results.api import load_run, load_summaries
from tests.helpers.processes import TORCHRUN

JOB = """
import os, sys, time, torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset

class Store(Dataset):  # each sample waits on a slow store, then costs little CPU
    def __len__(self):
        return LENGTH
    def __getitem__(self, i):
        time.sleep(WAIT_S)
        end = time.thread_time() + CPU_S
        while time.thread_time() < end:
            pass
        return torch.zeros(8), i % 10

class Stream(IterableDataset):
    def __iter__(self):
        for i in range(4000):
            time.sleep(WAIT_S)
            yield torch.zeros(8), i % 10

if __name__ == "__main__":
    dataset = Stream() if ITERABLE else Store()
    sampler = None
    if "RANK" in os.environ:  # under torchrun: data-parallel, each rank its share of the samples
        dist.init_process_group("gloo")
        sampler = DistributedSampler(dataset)
    loader = DataLoader(
        dataset, batch_size=8, num_workers=WORKERS, multiprocessing_context=CONTEXT, sampler=sampler,
        persistent_workers=PERSISTENT and WORKERS > 0,
    )
    step = 0
    for epoch in range(EPOCHS):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            time.sleep(STEP_S)
            if sampler is not None:
                dist.all_reduce(x)  # the ranks step together, as DDP's gradient all-reduce makes them
            if step == CRASH_AT:
                raise RuntimeError("the job's own failure")
            step += 1
    print("the job's own last line")
    sys.exit(EXIT)
"""


def job(
    tmp_path,
    *,
    wait_s=0.004,
    cpu_s=0.0,
    step_s=0.002,
    workers=2,
    context=None,
    crash_at=-1,
    iterable=False,
    exit_code=0,
    length=40000,
    epochs=1,
    persistent=False,
) -> str:
    settings = dict(
        LENGTH=length,
        EPOCHS=epochs,
        PERSISTENT=persistent,
        WAIT_S=wait_s,
        CPU_S=cpu_s,
        STEP_S=step_s,
        WORKERS=workers,
        CONTEXT=repr(context),
        CRASH_AT=crash_at,
        ITERABLE=iterable,
        EXIT=exit_code,
    )
    path = tmp_path / "job.py"
    path.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()) + textwrap.dedent(JOB))
    return str(path)


def probe(iobench_sweep, tmp_path, script: str, *flags: str, launcher: tuple[str, ...] = (sys.executable,)):
    out = tmp_path / "run"
    proc = iobench_sweep.run(
        "probe",
        "--out",
        out,
        "--steps",
        "20",
        "--seconds",
        "3",
        *flags,
        "--",
        *launcher,
        script,
        timeout=180,
        cwd=tmp_path,
    )
    return proc, out


def test_a_slow_store_is_fetch_bound_with_both_ceilings_and_the_run_reads_back(
    iobench_sweep, iobench, tmp_path
):
    proc, out = probe(iobench_sweep, tmp_path, job(tmp_path, wait_s=0.004, step_s=0.001), "--ceilings")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the job's own last line" not in proc.stdout  # stopped after the window, through SystemExit(0)
    (summary,) = load_summaries(out)
    assert summary.verdict.bound == "fetch", summary.verdict.headline
    assert summary.ceilings is not None and {c.name for c in summary.ceilings.measured} == {
        "accelerator",
        "fetch",
    }
    assert summary.attribution is not None and summary.attribution.agree
    assert summary.window.met
    assert load_run(out).column("verdict").to_pylist() == ["fetch"]
    assert "fetch-bound" in proc.stderr and (out / "sweep.yaml").exists()
    report = iobench("report", out, "--html", cwd=tmp_path)
    assert report.returncode == 0 and (out / "report.html").exists()
    assert iobench("compare", out, out, cwd=tmp_path).returncode == 0


def test_spawned_workers_are_reached_and_their_cpu_bound_samples_are_prep(iobench_sweep, tmp_path):
    script = job(tmp_path, wait_s=0.0, cpu_s=0.004, step_s=0.0005, workers=1, context="spawn")
    proc, out = probe(iobench_sweep, tmp_path, script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = load_summaries(out)
    assert summary.stage_cpu_ms_per_sample["decode"] == pytest.approx(4.0, rel=0.5)
    v = summary.verdict
    # one worker spinning on its samples: prep-bound, or, where the rest of the host took the other
    # core meanwhile (a shared machine), the cores are spent: the judge's rule, checked on its budget
    expected = ("cores", None) if v.budget is not None and v.budget.spent else ("prep", "decode")
    assert (v.bound, v.binding_stage) == expected, v.headline


def test_torchrun_ranks_are_each_reached_and_the_job_is_judged_over_both(iobench_sweep, tmp_path):
    launcher = (*TORCHRUN, "--nproc-per-node", "2")
    proc, out = probe(iobench_sweep, tmp_path, job(tmp_path, workers=1), launcher=launcher)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = load_summaries(out)
    assert len(summary.ranks) == 2
    v = summary.verdict
    # the readers wait on the store; where the rest of a shared host spent the cores meanwhile, the
    # judge says the cores are spent instead: checked on the job's budget
    assert v.bound == ("cores" if v.budget is not None and v.budget.spent else "fetch"), v.headline


def test_a_crashing_job_keeps_its_traceback_and_exit_code_and_what_was_measured(iobench_sweep, tmp_path):
    proc, out = probe(iobench_sweep, tmp_path, job(tmp_path, crash_at=40, workers=1))
    assert proc.returncode == 1
    assert "RuntimeError: the job's own failure" in proc.stderr
    (summary,) = load_summaries(out)
    assert summary.ok and not summary.window.met
    assert "exit code 1" in summary.window.short_because


def test_an_iterable_dataset_left_to_go_on_gets_the_loops_figures_and_a_note(iobench_sweep, tmp_path):
    proc, out = probe(
        iobench_sweep, tmp_path, job(tmp_path, iterable=True, workers=1, exit_code=3), "--then", "continue"
    )
    assert proc.returncode == 3
    assert "the job's own last line" in proc.stdout  # it went on to its end
    (summary,) = load_summaries(out)
    assert summary.ok and summary.metrics.steps >= 20
    assert any("IterableDataset has no per-index hook" in note for note in summary.warnings)


def test_a_job_that_never_iterates_a_dataloader_is_told_what_was_seen(iobench_sweep, tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import torch\nprint('no loader here')\n")
    proc, out = probe(iobench_sweep, tmp_path, str(script))
    assert proc.returncode == 0 and "no loader here" in proc.stdout
    assert "nothing measured" in proc.stderr
    assert "no torch.utils.data.DataLoader (nor a DALI iterator) was iterated" in proc.stderr
    assert "the job exited with code 0" in proc.stderr
    assert load_run(out).column("status").to_pylist() == ["failed"]


def test_a_command_that_is_not_python_is_refused_before_it_runs(iobench, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\ntouch ran\n")
    script.chmod(0o755)
    proc = iobench("probe", "--out", tmp_path / "run", "--", str(script), cwd=tmp_path)
    assert proc.returncode == 2
    assert "not Python" in proc.stderr and "/bin/sh" in proc.stderr
    assert not (tmp_path / "ran").exists()


def test_short_epochs_under_torchrun_leave_the_loader_alone_out_and_the_job_still_stops(
    iobench_sweep, tmp_path
):
    # 2 ranks of 80 samples each: 10 batches an epoch, fewer than the loader alone takes (its
    # workers' queue, 10 timed batches, the epoch's last): it is left out and said, never waited for
    launcher = (*TORCHRUN, "--nproc-per-node", "2")
    script = job(tmp_path, wait_s=0.001, workers=1, length=160, epochs=400)
    proc, out = probe(iobench_sweep, tmp_path, script, "--ceilings", launcher=launcher)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the job's own last line" not in proc.stdout  # stopped as asked (--then stop), not run out
    (summary,) = load_summaries(out)
    said = " ".join(summary.warnings)
    assert "the loader alone was not measured: an epoch of 10 batches is shorter than the" in said
    assert (
        "a lower --steps" in said
        and summary.ceilings is not None
        and summary.ceilings.accelerator is not None
    )


def test_workers_started_anew_each_short_epoch_make_the_epochs_opening_the_verdict(iobench_sweep, tmp_path):
    # spawned, non-persistent workers: each epoch of 20 batches waits for two new interpreters
    script = job(tmp_path, wait_s=0.0, step_s=0.001, workers=2, context="spawn", length=160, epochs=200)
    proc, out = probe(iobench_sweep, tmp_path, script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = load_summaries(out)
    v = summary.verdict
    assert (v.bound, v.binding_stage) == ("prep", "loader_start"), v.headline
    assert "persistent_workers=True" in v.action and summary.split.loader_start > 0.5


def test_a_job_whose_workers_fill_the_cores_is_judged_on_its_budget_alike_in_the_probe_and_its_sweep(
    iobench_sweep, iobench, tmp_path
):
    # a plain script (PIL decode in two workers, a tiny model) on this host's cores: the probe and the
    # sweep of the file it wrote say the cores are spent, price them alike, advise no worker count
    import subprocess

    from tests.helpers.paths import ROOT

    tree = tmp_path / "tree"
    made = ROOT / "examples" / "probe" / "make_tree.py"
    subprocess.run(
        [sys.executable, str(made), str(tree), "--samples", "384"], check=True, capture_output=True
    )
    out = tmp_path / "run"
    script = ROOT / "examples" / "probe" / "train_images.py"
    proc = iobench_sweep.run(
        "probe", "--out", out, "--steps", "30", "--seconds", "5", "--ceilings", "--",
        sys.executable, script, tree, "--workers", "2", "--batch-size", "16", "--model", "tiny",
        "--epochs", "40", timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (probed,) = load_summaries(out)
    assert iobench("dataset", "pack", tree, "--out", out / "dataset", cwd=tmp_path).returncode == 0
    swept = iobench_sweep.run("sweep", out / "sweep.yaml", "--out", tmp_path / "swept", cwd=tmp_path)
    assert swept.returncode == 0, swept.stderr[-3000:]
    (cell,) = [s for s in load_summaries(tmp_path / "swept") if s.cell.tier_name == "local"]
    # the cores are spent where the window's budget says so (the judge's rule: 90 % of the usable
    # cores); two workers and the trainer on two cores come to 1.8-2.0 of them, so a window at the
    # edge is prep-bound (decode) by the same rule, and where spent no worker count is advised
    for v in (probed.verdict, cell.verdict):
        spent = v.budget is not None and v.budget.spent
        assert v.bound == ("cores" if spent else "prep"), (v.headline, v.budget)
        if spent:
            assert "more workers" not in v.action and "fewer workers" not in v.action
    ratio = cell.verdict.cores.per_accelerator / probed.verdict.cores.per_accelerator
    print(
        f"figures: probed {probed.metrics.samples_per_s:,.0f}/s, {probed.verdict.cores.per_accelerator:.1f} cores "
        f"per accelerator; swept {cell.metrics.samples_per_s:,.0f}/s, {cell.verdict.cores.per_accelerator:.1f}"
    )
    assert 0.75 < ratio < 1.33
