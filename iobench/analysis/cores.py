"""The cores a window used and the cores an accelerator takes: the one core budget and the one cores
figure that the verdict, the report, the probe, ``inspect`` and ``recommend`` show, so for the same
inputs they say the same number (docs/method.md, The core budget; Cores per accelerator)."""

from __future__ import annotations

from iobench.host.cpuload import HostLoad
from iobench.results.figures import CoreBudget, CoresNeeded


def cores_to_feed(samples_per_s: float, cpu_ms_per_sample: float, trainer_cores: float = 0.0) -> float:
    """The cores delivering ``samples_per_s`` keeps busy at ``cpu_ms_per_sample`` of loader CPU each,
    plus the ``trainer_cores`` its trainer process keeps."""
    return samples_per_s * cpu_ms_per_sample / 1000.0 + trainer_cores


def core_budget(
    load: HostLoad, *, window_s: float, trainer_process_cpu_s: float, readers_in_process_cpu_s: float = 0.0
) -> CoreBudget | None:
    """Where the window's cores went. ``load`` is the host's over the window (the job's tree and
    iobench's own included); ``trainer_process_cpu_s`` the trainer's process(es) CPU over the window's
    ``window_s`` seconds, of which ``readers_in_process_cpu_s`` were the loader's readers running in
    them. None where the host's or the job's counters were not readable."""
    if load.busy is None or load.job is None or load.seconds <= 0 or window_s <= 0:
        return None
    trainer_process = trainer_process_cpu_s / window_s
    in_process = readers_in_process_cpu_s / window_s
    # the tree's CPU beyond the trainer's processes is its worker processes'; the counters are read at
    # other instants than the steps' clocks, so a difference below zero is noise
    workers = max(0.0, load.job - trainer_process)
    return CoreBudget(
        usable=load.usable,
        trainer=max(0.0, trainer_process - in_process - load.own_inside),
        readers=workers + in_process,
        own=load.own_outside + load.own_inside,
        others=max(0.0, load.busy - load.job - load.own_outside),
        steal=load.steal,
    )


def cores_needed(
    samples_per_s: float, fed: str, *, loader_cpu_ms: float, trainer_cpu_ms: float
) -> CoresNeeded:
    """The cores one accelerator fed at ``samples_per_s`` takes: its loader's CPU per sample and its
    trainer's, each at that rate."""
    return CoresNeeded(
        samples_per_s=samples_per_s,
        fed=fed,
        loader_cpu_ms_per_sample=loader_cpu_ms,
        trainer_cpu_ms_per_sample=trainer_cpu_ms,
        loader=cores_to_feed(samples_per_s, loader_cpu_ms),
        trainer=cores_to_feed(samples_per_s, trainer_cpu_ms),
    )


def describe_cores(need: CoresNeeded) -> str:
    """The cores figure in words, wherever it is shown."""
    return (
        f"{need.per_accelerator:.1f} cores per accelerator to feed the {need.samples_per_s:,.0f}/s of "
        f"{need.fed}: {need.loader:.1f} for the loader at {need.loader_cpu_ms_per_sample:.2f} CPU-ms per "
        f"sample and {need.trainer:.1f} for the trainer at {need.trainer_cpu_ms_per_sample:.2f}"
    )


def shared_ceiling(need: CoresNeeded, budget: CoreBudget | None, usable: int) -> float | None:
    """Samples/s the job's cores feed when the loader and the trainer share them: the cores other
    processes left it (the budget's; all ``usable`` ones without one) over the CPU a sample costs
    both (the differential's "cores" ceiling: the loader alone and the step alone each ignore the
    other)."""
    per_sample = need.loader_cpu_ms_per_sample + need.trainer_cpu_ms_per_sample
    free = usable if budget is None else max(0.0, budget.usable - budget.others - budget.own)
    return 1000.0 * free / per_sample if per_sample > 0 and free > 0 else None
