"""`iobench monitor` beside real processes: a job that reads files, and a sweep's run directory."""

from __future__ import annotations

import argparse
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from rich.console import Console

import iobench.cell.live
from iobench.cell.live import LiveFile
from iobench.host.pagecache import evict
from iobench.monitor.cli import add_monitor_arguments, monitor_command
from iobench.results.figures import StepRow
from iobench.sweep.rundir import SCRATCH_PREFIX, SWEEP_FILE, SweepState
from tests.helpers.promkit import Scrape, documented

# A job that reads what it is told to, itself or in forked workers (no imports after start-up, so
# between two commands it reads nothing but the file and the command line).
JOB = r"""
import os, signal, sys, time
def read(path):
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
workers = []
for line in iter(sys.stdin.readline, ""):
    cmd, path = line.split()
    if cmd == "read":
        read(path)
    elif cmd == "fork-read":  # a worker that reads, exits and is reaped
        pid = os.fork()
        if pid == 0:
            read(path)
            os._exit(0)
        os.waitpid(pid, 0)
    elif cmd == "spin":  # user CPU, and no read
        start = time.process_time()
        while time.process_time() - start < float(path):
            sum(range(20000))
    elif cmd == "worker":  # a worker that reads and stays
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            read(path)
            os.write(w, b"x")
            signal.pause()
        os.read(r, 1)
        workers.append(pid)
    print("done", flush=True)
for pid in workers:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"""


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_monitor_arguments(parser)
    return parser.parse_args(list(argv))


def _once(*argv: str) -> Scrape:
    out = io.StringIO()
    assert monitor_command(_args(*argv, "--once", "--no-gpu"), Console(file=out)) == 0
    return Scrape(out.getvalue())


class Job:
    def __init__(self) -> None:
        # a session of its own: its workers (which pause until it kills them) go with it
        self.proc = subprocess.Popen(
            [sys.executable, "-c", JOB],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.pid = str(self.proc.pid)

    def ask(self, cmd: str, path: object) -> None:
        self.proc.stdin.write(f"{cmd} {path}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "done\n"

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def job():
    j = Job()
    yield j
    if j.proc.poll() is None:
        os.killpg(j.proc.pid, signal.SIGKILL)  # the job and the workers it left paused
        j.proc.wait()


def _file(path, size: int):
    path.write_bytes(os.urandom(size))
    return path


def test_a_jobs_reads_count_in_its_own_and_in_exited_and_live_workers(tmp_path, job):
    a, b, c = (
        _file(tmp_path / "a", 1_000_000),
        _file(tmp_path / "b", 3_000_000),
        _file(tmp_path / "c", 2_000_000),
    )
    job.ask("read", a)  # start-up behind us
    s0 = _once("--pid", job.pid)
    cold = evict(b).resident_bytes == 0  # tmpfs cannot drop pages: then no read reaches a device
    job.ask("fork-read", b)
    s1 = _once("--pid", job.pid)
    job.ask("worker", c)
    s2 = _once("--pid", job.pid)

    def delta(before: Scrape, after: Scrape, name: str) -> float:
        return after.value(name) - before.value(name)

    # a worker's reads stay counted after it exits (Linux moves them to the parent that reaps it);
    # the slack is the command line the job reads from its stdin (and its worker's 1-byte reply)
    assert 3_000_000 <= delta(s0, s1, "iobench_job_read_bytes_total") <= 3_000_000 + 1024
    assert 2_000_000 <= delta(s1, s2, "iobench_job_read_bytes_total") <= 2_000_000 + 1024
    storage = delta(s0, s1, "iobench_job_storage_read_bytes_total")
    assert 3_000_000 <= storage <= 3_000_000 + 2**20 if cold else storage == 0
    assert s1.value("iobench_job_processes") == 1 and s2.value("iobench_job_processes") == 2
    assert s2.value("iobench_job_resident_memory_bytes") > s1.value("iobench_job_resident_memory_bytes") > 0
    # CPU seconds come in clock ticks: a job that has done next to nothing may still show 0 here
    job.ask("spin", 0.3)
    s3 = _once("--pid", job.pid)
    user = s3.value("iobench_job_cpu_seconds_total", mode="user") - s2.value(
        "iobench_job_cpu_seconds_total", mode="user"
    )
    assert 0.2 <= user < 1.0
    assert delta(s2, s3, "iobench_job_read_bytes_total") <= 1024  # spinning reads nothing
    assert s2.names() == documented("iobench_job_")


def test_serving_beside_a_job_until_it_exits(tmp_path, job):
    data = _file(tmp_path / "data", 500_000)
    out = io.StringIO()
    status: list[int] = []
    args = _args("--pid", job.pid, "--port", "0", "--addr", "127.0.0.1", "--no-gpu")
    monitor = threading.Thread(
        target=lambda: status.append(monitor_command(args, Console(file=out, width=200)))
    )
    monitor.start()
    try:
        for _ in range(100):
            found = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", out.getvalue())
            if found:
                break
            time.sleep(0.05)
        assert found, out.getvalue()
        port = int(found.group(1))
        first = Scrape.of(port)
        job.ask("read", data)
        second = Scrape.of(port)
    finally:
        job.stop()
        monitor.join(timeout=10)
    assert status == [0] and f"job {job.pid} exited" in out.getvalue()
    assert (
        second.value("iobench_job_read_bytes_total") - first.value("iobench_job_read_bytes_total") >= 500_000
    )


def test_a_running_sweep_cell_is_re_exported_from_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(iobench.cell.live, "INTERVAL_S", 0.0)  # write every step
    (tmp_path / SWEEP_FILE).write_text("dataset: {synth: {samples: 64}}\n")
    state = SweepState(tmp_path)
    state.start("cell-0")
    state.finish("ok")
    assert _once("--run-dir", str(tmp_path)).names() == {"iobench_sweep_cell_attempts_total"}

    state.start("cell-1")
    scratch = tmp_path / f"{SCRATCH_PREFIX}cell-1"
    scratch.mkdir()
    live = LiveFile(scratch / "live.json")  # the file the sweep names for its running cell
    live.start_run()
    for step, wait in enumerate((0.5, 0.25, 0.25)):
        live.on_step(StepRow(step, 0, False, step, wait, 0.0, 0.5, step + 1.0, 4, 1000))
    scrape = _once("--run-dir", str(tmp_path))
    cell = {"cell": "cell-1"}
    assert scrape.value("iobench_sweep_cell_steps", **cell) == 3
    assert scrape.value("iobench_sweep_cell_samples", **cell) == 12
    # after the first step: 8 samples and 0.5 s of waits in the 2 s from its end to the last step's
    assert scrape.value("iobench_sweep_cell_samples_per_second", **cell) == 4.0
    assert scrape.value("iobench_sweep_cell_stall_ratio", **cell) == 0.25
    assert scrape.value("iobench_sweep_cell_attempts_total", status="ok") == 1
    assert scrape.names() == documented("iobench_sweep_")

    # a checkpoint cell: a save of 6 MB committed after the third step, which blocked 0.4 s
    live.on_checkpoint(6_000_000)
    live.on_step(StepRow(3, 0, False, 3, 0.0, 0.0, 0.5, 5.0, 4, 1000, checkpoint_s=0.4))
    scrape = _once("--run-dir", str(tmp_path))
    assert scrape.value("iobench_sweep_cell_checkpoint_blocked_seconds", **cell) == 0.4
    assert scrape.value("iobench_sweep_cell_checkpoint_bytes_per_second", **cell) == 1_500_000.0


def test_wrong_input_says_what_to_give(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    for argv, message in (
        ((), "give --pid PID"),
        (("--pid", str(gone.pid)), f"--pid {gone.pid}: no such process"),
        (("--run-dir", str(tmp_path)), "not the run directory of an iobench sweep"),
        (("--pid", str(os.getpid()), "--duration", "0"), "must be a positive number of seconds"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            monitor_command(_args(*argv, "--no-gpu"), Console(file=io.StringIO()))


def test_without_prometheus_client_the_cli_names_the_extra_to_install():
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from iobench.cli import main\n"
        "sys.exit(main(['monitor', '--pid', '1', '--once']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'iobench[prometheus]'" in " ".join(proc.stderr.split())  # rich wraps at 80
    assert "Traceback" not in proc.stderr
