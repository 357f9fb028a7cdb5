"""One probe: the job started as given (its standard streams are this process's, untouched), its
records followed while it runs, the measured window closed once it is long enough, the job then
stopped or left to go on, and what was measured written out.

The job gets the probe through its environment only: this package's ``inject`` directory first on
PYTHONPATH (its sitecustomize loads the hooks into every Python process of the job), the records'
directory in IOBENCH_PROBE_DIR. Ctrl-C reaches the job as it would without the probe (the probe
ignores it and waits for the job); a SIGTERM to the probe is passed on to the job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import psutil

from iobench.host.atomic import atomic_write_json
from iobench.host.cores import usable_cores
from iobench.host.cpuload import CpuSample, host_cpu
from iobench.host.proctree import ProcessTree
from iobench.results.spec import MinMeasure
from iobench.results.summary import utc_now
from loaders.observe import Nvml, NvmlUnavailable

from .command import Command
from .inject._iobench_probe.records import CONTROL_NAME, ENV_CEILINGS, ENV_DIR
from .measure import rank_runs
from .outcome import Outcome
from .plan import Plan, phases_done, window_plan
from .reader import Follower, Job
from .seen import notes_for, what_was_seen

INJECT = Path(__file__).parent / "inject"
POLL_S = 0.25
# while the phases after the window run (the step alone, the loader alone), the probe reads the
# records this seldom: its own process keeps off the cores the ceilings are timed on
PHASE_POLL_S = 1.0
STOP_GRACE_S = 30.0  # after every rank was told to stop, the job's time to end before SIGTERM
Then = Literal["stop", "continue"]


def job_environment(records: Path, ceilings: bool, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(INJECT), env.get("PYTHONPATH", "")) if p)
    env[ENV_DIR] = str(records)
    env[ENV_CEILINGS] = "1" if ceilings else "0"
    return env


def _nvml() -> Nvml | None:
    """NVML beside the job, where there is a GPU to read."""
    try:
        return Nvml()
    except NvmlUnavailable:
        return None


class Probe:
    def __init__(
        self,
        command: Command,
        out: Path,
        *,
        least: MinMeasure,
        ceilings: bool,
        then: Then,
        on_result: Callable[[Outcome], None],
    ) -> None:
        self.command = command
        self.out = out
        self.records = out / ".probe-records"
        self.least = least
        self.ceilings = ceilings
        self.then = then
        self.on_result = on_result  # called once, with what was measured
        self.plan: Plan | None = None
        self.published = False
        self.gpu: list[tuple[float, float]] = []
        self.cpu: list[CpuSample] = []
        self.tree: ProcessTree | None = None

    def run(self) -> int:
        self.records.mkdir(parents=True, exist_ok=True)
        for old in self.records.iterdir():  # a probe run again into the same directory starts afresh
            old.unlink()
        started = utc_now()
        self._clock = (time.perf_counter(), time.process_time())
        follower = Follower(self.records)
        nvml = _nvml()
        child = subprocess.Popen(list(self.command.argv), env=job_environment(self.records, self.ceilings))
        try:
            self.tree = ProcessTree(child.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self.tree = None
        previous = {
            signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
            signal.SIGTERM: signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM)),
        }
        stop_told: float | None = None
        try:
            while True:
                code = child.poll()
                job = follower.read()
                self._sample_gpu(nvml)
                self._sample_cpu()
                if code is not None:
                    break
                if self.plan is None:
                    self.plan = window_plan(job, self.least, self.ceilings)
                    if self.plan is not None:
                        self._control(off=False)
                elif phases_done(job, self.plan, self.ceilings):
                    if self.then == "continue" and not self.published:
                        self._control(off=True)
                        self._publish(job, started, None)
                    elif self.then == "stop":
                        stop_told = stop_told or time.monotonic()
                        if time.monotonic() - stop_told > STOP_GRACE_S:
                            child.terminate()
                time.sleep(POLL_S if self.plan is None or not self.ceilings else PHASE_POLL_S)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if nvml is not None:
                nvml.close()
        job = follower.read()
        if not self.published:
            self._publish(job, started, code)
        return 128 - code if code < 0 else code

    def _control(self, off: bool) -> None:
        assert self.plan is not None
        atomic_write_json(
            self.records / CONTROL_NAME, {"streams": self.plan.streams, "then": self.then, "off": off}
        )

    def _sample_gpu(self, nvml: Nvml | None) -> None:
        if nvml is None:
            return
        try:
            samples = nvml.sample()
        except Exception:  # a GPU that stops answering ends the GPU figures, not the probe
            return
        if samples:
            self.gpu.append((time.perf_counter(), sum(g.utilization_pct for g in samples) / len(samples)))

    def _sample_cpu(self) -> None:
        """The host's counters, the job's tree's and this process's own: the core budget's input."""
        tree = self.tree.totals() if self.tree is not None else None
        self.cpu.append(
            CpuSample(
                host=host_cpu(),
                job_s=tree["user"] + tree["system"] if tree else None,
                own_outside_s=time.process_time(),
            )
        )

    def _own_cores(self) -> float:
        """The cores this process (following the job, sampling NVML) used so far."""
        wall, cpu = self._clock
        return (time.process_time() - cpu) / max(1e-9, time.perf_counter() - wall)

    def _publish(self, job: Job, started: str, code: int | None) -> None:
        plan = self.plan
        runs = tuple(rank_runs(job, plan.end if plan else None, plan.warmup if plan else {}))
        short = None
        if plan is None:
            short = "the job's end" if code == 0 else f"the job's end (exit code {code})"
        versions = [t.version for t in job.torch.values()]
        outcome = Outcome(
            command=self.command.argv,
            name=self.command.name,
            runs=runs,
            least=self.least,
            ceilings=self.ceilings,
            exit_code=code,
            short_because=short,
            cores=usable_cores(),
            cuda=any(job.device.values()),
            torch_version=versions[0] if versions else None,
            started_at=started,
            notes=tuple(notes_for(job, runs)),
            seen=what_was_seen(job, code, self.command),
            gpu=tuple(self.gpu),
            probe_cores=self._own_cores(),
            cpu=tuple(self.cpu),
        )
        self.published = True
        self.on_result(outcome)
