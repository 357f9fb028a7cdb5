"""`iobench monitor`: Prometheus metrics for a job running beside it, with no change to the job.

``--pid PID`` follows a process and every process below it (DataLoader workers included): bytes
read, CPU seconds, resident memory, from /proc through psutil. ``--run-dir DIR`` re-exports the
live figures a running ``iobench sweep`` keeps for its current cell (samples/s, stall fraction).
With NVML the GPUs are exported too. Metrics are defined in docs/monitoring.md.

Importing this module is cheap (the CLI parser is built for every command): prometheus_client
and psutil load when the command runs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from loaders.observe import Nvml

DEFAULT_PORT = 9451
POLL_S = 0.2


class JobCounters:
    """A job's process tree (host/proctree.py) as a Prometheus collector."""

    def __init__(self, pid: int) -> None:
        import psutil

        from iobench.host.proctree import ProcessTree

        try:
            self.tree = ProcessTree(pid)
        except psutil.NoSuchProcess:
            raise ValueError(
                f"--pid {pid}: no such process (is the job running? `pgrep -f train.py` finds it)"
            ) from None
        except psutil.AccessDenied:
            raise ValueError(
                f"--pid {pid}: /proc/{pid}/io is readable only by the job's owner or root: run iobench "
                "monitor as the user who started the job"
            ) from None

    def alive(self) -> bool:
        return self.tree.alive()

    def collect(self) -> list:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        t = self.tree.totals()
        cpu = CounterMetricFamily(
            "iobench_job_cpu_seconds", "CPU seconds of the job's processes.", labels=["mode"]
        )
        cpu.add_metric(["user"], t["user"])
        cpu.add_metric(["system"], t["system"])
        return [
            CounterMetricFamily(
                "iobench_job_read_bytes",
                "Bytes the job's processes got from read calls: files (page cache included), sockets, pipes.",
                value=t["read_chars"],
            ),
            CounterMetricFamily(
                "iobench_job_storage_read_bytes",
                "Bytes the job's processes caused to be read from block devices (page-cache hits excluded).",
                value=t["read_bytes"],
            ),
            cpu,
            GaugeMetricFamily(
                "iobench_job_resident_memory_bytes",
                "Resident memory of the job's processes, summed.",
                value=t["rss"],
            ),
            GaugeMetricFamily(
                "iobench_job_processes", "Processes in the job's tree now.", value=t["processes"]
            ),
        ]


class SweepCell:
    """The live figures of the cell a sweep is running, from its run directory, as a collector."""

    def __init__(self, run_dir: Path) -> None:
        from iobench.sweep.rundir import SWEEP_FILE

        if not (run_dir / SWEEP_FILE).is_file():
            raise ValueError(
                f"--run-dir {run_dir}: no {SWEEP_FILE} there, so it is not the run directory of an iobench "
                "sweep; give the --out of a running `iobench sweep`"
            )
        self.run_dir = run_dir

    def collect(self) -> list:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from iobench.cell.live import read_live
        from iobench.sweep.rundir import LIVE_NAME, SweepState, scratch_dir

        state = SweepState(self.run_dir)
        attempts = CounterMetricFamily(
            "iobench_sweep_cell_attempts", "Cells the sweep finished, by outcome.", labels=["status"]
        )
        by_status: dict[str, int] = {}
        for attempt in state.data.get("attempts", []):
            by_status[attempt["status"]] = by_status.get(attempt["status"], 0) + 1
        for status, n in sorted(by_status.items()):
            attempts.add_metric([status], n)
        families: list = [attempts]  # counters and gauges
        running = state.running
        live = read_live(scratch_dir(self.run_dir, running["cell_id"]) / LIVE_NAME) if running else None
        if not running or not live:
            return families
        cell = [running["cell_id"]]
        for name, key, doc in (
            ("steps", "steps", "Steps of the running cell's current measured run so far."),
            ("samples", "samples", "Samples of the running cell's current measured run so far."),
            ("samples_per_second", "samples_per_s", "Samples/s of the running cell since its first step."),
            ("stall_ratio", "stall_fraction", "Stall fraction of the running cell since its first step."),
            (
                "checkpoint_blocked_seconds",
                "checkpoint_blocked_s",
                "Seconds the running checkpoint cell's training loop was blocked saving checkpoints.",
            ),
            (
                "checkpoint_bytes_per_second",
                "checkpoint_bytes_per_s",
                "Bytes/s the running checkpoint cell's saves committed since its first step.",
            ),
        ):
            if live.get(key) is not None:
                family = GaugeMetricFamily(f"iobench_sweep_cell_{name}", doc, labels=["cell"])
                family.add_metric(cell, live[key])
                families.append(family)
        return families


def add_monitor_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pid", type=int, help="the job's process: it and every process below it are measured")
    p.add_argument(
        "--run-dir", type=Path, help="the --out of a running `iobench sweep`: its live cell figures"
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to serve /metrics on (default {DEFAULT_PORT})"
    )
    p.add_argument("--addr", default="0.0.0.0", help="address to listen on (default all interfaces)")
    p.add_argument(
        "--gpu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="NVIDIA GPU metrics through NVML (default: when NVML is available)",
    )
    p.add_argument(
        "--once", action="store_true", help="print the metrics once, in Prometheus text form, and exit"
    )
    p.add_argument(
        "--duration", type=float, help="serve for this many seconds, then exit (default: until the job exits)"
    )


def _open_gpus(wanted: bool | None, console: Console | None) -> Nvml | None:
    """An NVML session; with ``wanted`` None, none where NVML is unavailable (said on ``console``)."""
    from loaders.observe import Nvml, NvmlUnavailable

    if wanted is False:
        return None
    try:
        return Nvml()
    except NvmlUnavailable as exc:
        if wanted:
            raise ValueError(f"--gpu: {exc}") from None
        if console is not None:
            console.print(f"no GPU metrics: {exc}")
        return None


def monitor_command(args: argparse.Namespace, console: Console) -> int:
    # first: without prometheus-client installed, this import says which extra to install
    from loaders.observe import GpuCollector  # isort: skip
    from prometheus_client import CollectorRegistry

    if args.pid is None and args.run_dir is None:
        raise ValueError(
            "give --pid PID (a training job) or --run-dir DIR (a running iobench sweep), or both"
        )
    if args.duration is not None and args.duration <= 0:
        raise ValueError(f"--duration {args.duration}: must be a positive number of seconds")
    tree = JobCounters(args.pid) if args.pid is not None else None
    cell = SweepCell(args.run_dir) if args.run_dir is not None else None
    nvml = _open_gpus(args.gpu, None if args.once else console)  # --once prints metrics only
    registry = CollectorRegistry()
    for collector in (tree, cell, GpuCollector(nvml) if nvml is not None else None):
        if collector is not None:
            registry.register(collector)
    try:
        if args.once:
            from prometheus_client import generate_latest

            console.out(generate_latest(registry).decode(), end="", highlight=False)
            return 0
        return _serve(registry, tree, args, console)
    finally:
        if nvml is not None:
            nvml.close()


def _serve(
    registry: CollectorRegistry, tree: JobCounters | None, args: argparse.Namespace, console: Console
) -> int:
    from loaders.observe import serve_registry

    server = serve_registry(registry, args.port, args.addr)
    what = [f"job {args.pid}"] if tree is not None else []
    what += [f"sweep {args.run_dir}"] if args.run_dir is not None else []
    console.print(
        f"serving metrics of {' and '.join(what)} on http://{args.addr}:{server.server_port}/metrics"
    )
    deadline = None if args.duration is None else time.monotonic() + args.duration
    try:
        while deadline is None or time.monotonic() < deadline:
            if tree is not None and not tree.alive():
                console.print(f"job {args.pid} exited: monitor stops")
                break
            time.sleep(POLL_S)
    finally:
        server.shutdown()
        server.server_close()
    return 0
