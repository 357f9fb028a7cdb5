"""MLPerf Storage's checkpointing workload: ``ranks`` processes (its rule: 8 for llama3-8b, 64 for
llama3-70b, 512 and 1024 for 405b and 1t) each write their shard of the model's checkpoint,
``writes`` times; the page cache is dropped; each checkpoint is read back ``reads`` times. Reported
as MLPerf Storage reports it: per save and per load, the duration (from the barrier that starts every
rank to the one after the slowest) and the throughput (the checkpoint's bytes over that duration).

    python -m torch.distributed.run --standalone --nproc-per-node N -m iobench.checkpoint.mlperf SPEC.json OUT.json

(``iobench checkpoint mlperf`` writes the spec and starts it, cli.py.) One process per rank, as MLPerf
Storage runs it; a host that cannot hold the model's checkpoint writes a fraction of it, said so.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iobench.results.checkpoint import CheckpointDestination
from iobench.results.codec import from_json

from .state import synthetic_state
from .targets import make_target
from .timing import timed_load, timed_save


@dataclass(frozen=True)
class MlperfSpec:
    model: str
    ranks: int
    bytes: int  # every rank's together, per checkpoint
    full_bytes: int  # the model's whole checkpoint
    destination: CheckpointDestination
    writes: int = 1
    reads: int = 1


@dataclass(frozen=True)
class Phase:
    """One save or load of every rank: MLPerf Storage's duration and throughput."""

    what: str  # "save" or "load"
    index: int
    duration_s: float
    throughput_gb_per_s: float
    slowest_rank_s: float  # the slowest rank's own call
    cold: str | None = None


def _phase(
    what: str, index: int, t0: float, t1: float, rank_s: list[float], nbytes: int, cold: str | None = None
) -> Phase:
    duration = t1 - t0
    return Phase(what, index, duration, nbytes / duration / 1e9 if duration > 0 else 0.0, max(rank_s), cold)


def run_checkpoint_rank(spec: MlperfSpec) -> list[Phase] | None:
    """This rank's part; rank 0 returns every phase."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    state = synthetic_state(spec.bytes, rank, world, init_device_mesh("cpu", (world,)))
    target = make_target(spec.destination)
    phases = []
    names = [f"mlperf-{i}" for i in range(spec.writes)]
    for i, name in enumerate(names):
        phases.append(_timed(lambda n=name: timed_save(target, state, n), "save", i, spec.bytes))
    for i in range(spec.reads):
        name = names[i % len(names)]
        phases.append(
            _timed(
                lambda n=name: timed_load(target, state, n, cold=True)[0],
                "load",
                i,
                spec.bytes,
            )
        )
    dist.barrier()
    if rank == 0:
        for name in names:
            target.remove(target.checkpoint_id(name))
    # every rank leaves together: a rank that tore its gloo pairs down while its peer was still busy
    # aborted ("terminate called without an active exception") on a loaded host
    dist.barrier()
    dist.destroy_process_group()
    return phases if rank == 0 else None


def _timed(call, what: str, index: int, nbytes: int) -> Phase:
    import torch.distributed as dist

    dist.barrier()
    t0 = time.perf_counter()
    timed = call()
    dist.barrier()
    t1 = time.perf_counter()
    everyone: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, timed.seconds)
    return _phase(what, index, t0, t1, everyone, nbytes, timed.cold)


def summary(spec: MlperfSpec, phases: list[Phase]) -> dict[str, Any]:
    """The figures MLPerf Storage reports for a checkpointing run, beside how they were made."""
    out: dict[str, Any] = {
        "model": spec.model,
        "num_processes": spec.ranks,
        "checkpoint_bytes": spec.bytes,
        "model_checkpoint_bytes": spec.full_bytes,
        "scale": spec.bytes / spec.full_bytes,
        "destination": spec.destination.location,
        "writer": spec.destination.writer
        + ("" if spec.destination.writer != "iobench" else f" ({spec.destination.io})"),
        "phases": [asdict(p) for p in phases],
    }
    for what in ("save", "load"):
        chosen = [p for p in phases if p.what == what]
        if chosen:
            out[f"{what}_duration_s_mean"] = statistics.fmean(p.duration_s for p in chosen)
            out[f"{what}_throughput_gb_per_s_mean"] = statistics.fmean(p.throughput_gb_per_s for p in chosen)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = from_json(MlperfSpec, json.loads(Path(args[0]).read_text()))
    warnings.filterwarnings("ignore", category=UserWarning)
    phases = run_checkpoint_rank(spec)
    if phases is not None:
        Path(args[1]).write_text(json.dumps(summary(spec, phases), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
