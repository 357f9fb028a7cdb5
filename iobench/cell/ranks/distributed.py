"""torch.distributed inside a multi-rank cell: who this rank is, the process group, its barriers,
the gather to rank 0 and the broadcast back, and how a failed rank tells the sweep why.

Only control traffic goes through the group (two barriers, one flag per epoch and one gather of small objects
per measured run, one broadcast per cell), so gloo carries it on CPU. With CUDA and a real model the
group also gets NCCL for CUDA tensors ("cpu:gloo,cuda:nccl"); barriers and object collectives stay
on gloo either way (torch picks the CPU backend for them when the group has one).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from iobench.cell.protocol import RANK_ERRORS_ENV

T = TypeVar("T")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value is None else int(value)


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job; the default is a one-process cell, where every collective
    is a no-op."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    node_rank: int = 0

    @classmethod
    def from_env(cls) -> Ranks:
        """From the variables torchrun sets for each rank."""
        return cls(
            rank=_env_int("RANK", 0),
            world_size=_env_int("WORLD_SIZE", 1),
            local_rank=_env_int("LOCAL_RANK", 0),
            local_world_size=_env_int("LOCAL_WORLD_SIZE", 1),
            node_rank=_env_int("GROUP_RANK", 0),
        )

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def host_leader(self) -> bool:
        """The first rank on its host: it makes the host's cache state and samples its telemetry."""
        return self.local_rank == 0

    def describe(self) -> str:
        return (
            f"rank {self.rank} of {self.world_size} (host {socket.gethostname()}, node {self.node_rank}, "
            f"local rank {self.local_rank})"
        )

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def gather(self, obj: object) -> list | None:
        """Every rank's ``obj`` on rank 0, in rank order; None on the other ranks."""
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        out: list | None = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0)
        return out

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (a MAX all-reduce): how the ranks agree on one answer."""
        if not self.distributed:
            return flag
        import torch
        import torch.distributed as dist

        box = torch.tensor([1 if flag else 0], dtype=torch.int32)
        dist.all_reduce(box, op=dist.ReduceOp.MAX)
        return bool(box.item())

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        if not self.distributed:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]


SOLO = Ranks()


def start_group(ranks: Ranks, *, cuda: bool, timeout_s: float) -> str | None:
    """Join the job's process group (torchrun's env:// rendezvous); returns the backend.

    ``timeout_s`` bounds every barrier and collective: a rank that dies or hangs stops the others
    with an error after at most that long instead of leaving them waiting forever (torchrun itself
    stops a node's other ranks as soon as one of them exits with an error).
    """
    if not ranks.distributed:
        return None
    import torch.distributed as dist

    backend = "cpu:gloo,cuda:nccl" if cuda else "gloo"
    dist.init_process_group(backend, timeout=dt.timedelta(seconds=timeout_s))
    return backend


def end_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def write_rank_error(ranks: Ranks, message: str) -> None:
    """Leave this rank's failure where the sweep looks (when a sweep started the cell)."""
    directory = os.environ.get(RANK_ERRORS_ENV)
    if not directory:
        return
    path = Path(directory) / f"rank-{ranks.rank}.error.json"
    path.write_text(json.dumps({"rank": ranks.rank, "t": time.time(), "error": message}))


def first_rank_error(directory: Path) -> str | None:
    """The failure that came first: a rank that fails makes the others fail after it (torchrun
    stops them, or their next collective breaks), so the earliest report is the cause."""
    reports = []
    for path in directory.glob("rank-*.error.json"):
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    if not reports:
        return None
    first = min(reports, key=lambda r: r["t"])
    others = len(reports) - 1
    return first["error"] + (f" (and {others} other rank(s) failed after it)" if others else "")
