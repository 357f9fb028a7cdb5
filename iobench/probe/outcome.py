"""What one probe of a job found: its ranks' measurements and how the probe went, the input of the
run directory (publish.py), the sweep file (sweepfile.py) and the lines printed after the job."""

from __future__ import annotations

from dataclasses import dataclass

from iobench.host.cpuload import CpuSample
from iobench.results.spec import MinMeasure

from .measure import ProbedRank


@dataclass(frozen=True)
class Outcome:
    command: tuple[str, ...]  # as the user gave it
    name: str  # what the job is called in the run directory (the script's name)
    runs: tuple[ProbedRank, ...]  # one per rank that took batches, by rank
    least: MinMeasure  # the window asked for (--steps or --seconds: analysis/window.py)
    ceilings: bool  # --ceilings asked for
    exit_code: int | None  # the job's, None while it still runs (--then continue)
    short_because: str | None  # why the window is short: the job ended, crashed, ...
    cores: int  # usable on this host
    cuda: bool  # the job used CUDA (its steps have device spans)
    torch_version: str | None
    started_at: str
    notes: tuple[str, ...] = ()  # what the probe could not see, said once for the whole job
    seen: str = ""  # when nothing was measured: what the probe saw of the job
    gpu: tuple[tuple[float, float], ...] = ()  # NVML beside the job: (perf_counter, mean utilisation %)
    probe_cores: float | None = None  # the cores the probe's own process used while it followed the job
    # the host's CPU counters, the job's tree's and the probe's own, read beside the job: the core
    # budget of its window (host/cpuload.py)
    cpu: tuple[CpuSample, ...] = ()

    @property
    def measured(self) -> bool:
        return any(run.window for run in self.runs)
