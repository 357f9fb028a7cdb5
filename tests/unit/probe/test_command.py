"""Which commands the probe runs (Python programs) and which it refuses, with the reason; and the
sitecustomize that reaches the job, which still runs the one it hides."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from iobench.probe.command import check_command
from iobench.probe.session import INJECT, job_environment


def test_python_commands_run_and_are_named_by_their_script_or_module():
    assert check_command([sys.executable, "train.py", "--epochs", "3"]).name == "train"
    assert check_command([sys.executable, "-u", "-m", "pkg.train"]).name == "pkg.train"


def test_a_script_whose_first_line_runs_python_runs(tmp_path):
    script = tmp_path / "train"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    assert check_command([str(script)]).name == "train"
    launcher = tmp_path / "torchrun"
    launcher.write_text("#!/usr/bin/env python3\n")
    launcher.chmod(0o755)
    assert check_command([str(launcher), "--nproc-per-node", "2", "fit.py"]).name == "fit"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["sh", "-c", "python train.py"], "sh is a compiled program, not Python"),
        ([sys.executable, "-I", "train.py"], "isolated mode ignores PYTHONPATH"),
        ([sys.executable, "-E", "train.py"], "-E ignores PYTHONPATH"),
        (["no-such-command-here"], "no such command"),
        ([], "give the job's command after --"),
    ],
)
def test_what_the_probe_cannot_reach_is_refused_with_the_reason(argv, said):
    with pytest.raises(ValueError, match=said):
        check_command(argv)


def test_a_shell_script_is_refused_naming_its_interpreter(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\npython train.py\n")
    script.chmod(0o755)
    with pytest.raises(ValueError, match="a script run by /bin/sh, not Python"):
        check_command([str(script)])


def _job_with_its_own_sitecustomize(tmp_path, source: str) -> tuple[dict[str, str], Path, Path]:
    """The probe's environment for a job whose PYTHONPATH holds a sitecustomize of ``source``: the
    environment, the job's own folder and the probe's records folder."""
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text(source)
    records = tmp_path / "records"
    records.mkdir()
    env = job_environment(records, ceilings=False, base={**os.environ, "PYTHONPATH": str(own)})
    return env, own, records


def test_the_probe_loads_into_a_job_and_still_runs_the_jobs_own_sitecustomize(tmp_path):
    env, own, records = _job_with_its_own_sitecustomize(
        tmp_path, "import os\nos.environ['OWN_SITECUSTOMIZE'] = 'ran'\n"
    )
    assert env["PYTHONPATH"].split(os.pathsep) == [str(INJECT), str(own)]
    code = "import os, sys; print(os.environ.get('OWN_SITECUSTOMIZE'), '_iobench_probe' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ran", "True"]
    assert out.stderr == ""  # the job's own streams untouched
    (log,) = records.glob("p*.jsonl")  # the one process said hello
    assert log.read_text().startswith('["hello"')


def test_a_failing_sitecustomize_of_the_jobs_says_what_python_would_and_the_probe_still_loads(tmp_path):
    env, _, _ = _job_with_its_own_sitecustomize(tmp_path, "raise RuntimeError('broken on purpose')\n")
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print('_iobench_probe' in sys.modules)"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "True"
    assert (
        "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nRuntimeError: broken on purpose"
        in out.stderr
    )


def test_a_launcher_run_as_a_module_is_named_by_the_script_it_launches():
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.launch",
        "--nproc-per-node",
        "2",
        "fit.py",
        "--lr",
        "0.1",
    ]
    assert check_command(argv).name == "fit"
