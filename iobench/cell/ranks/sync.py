"""How the ranks of a multi-rank cell keep step: as synchronous data-parallel training does.

Every step of data-parallel training ends in a gradient all-reduce, so no rank starts step k+1
before the slowest rank has its batch and has computed step k. Each rank here, once its batch
has arrived, enters one real collective over the job's process group (gloo on the CPU, NCCL for a
model on CUDA): it is released when the slowest rank has its batch too. The time it spends
blocked there is its *peer wait*. With ``sync: allreduce`` each rank then computes and waits the
*exposed* all-reduce time modelled on the target fabric (allreduce.py): the same for every rank,
so they stay in step. ``sync: barrier`` keeps the collective without the fabric time; ``sync:
none`` (and every one-rank cell) has no per-step sync, each rank running free.

The collective sits before the compute rather than after it: with equal compute on every rank
(an emulated accelerator) the step takes the slowest rank's data wait + compute + all-reduce
either way, and agreeing first carries a flag, "I have a batch", so when one rank's loader runs
out of its epoch every rank ends the epoch at the same step (the batches the others had are
dropped and counted, as DDP's drop_last would) and no rank is ever left waiting in a collective
its peers never enter.
"""

from __future__ import annotations

import time

import torch

from iobench.cell.ranks.allreduce import AllReduceModel
from iobench.cell.ranks.distributed import Ranks
from iobench.results.choices import SyncMode


class StepSync:
    """One rank's per-step synchronisation (see the module docstring)."""

    def __init__(
        self, ranks: Ranks, mode: SyncMode, model: AllReduceModel | None, device: torch.device | None = None
    ) -> None:
        if mode not in ("allreduce", "barrier"):
            raise ValueError(f"sync={mode!r}: a StepSync is for allreduce or barrier")
        self.ranks, self.mode, self.model = ranks, mode, model
        self.device = device if device is not None and device.type == "cuda" else torch.device("cpu")

    def agree(self, have_batch: bool) -> tuple[float, bool]:
        """Meet every rank: seconds spent waiting for the slowest, and whether all have a batch."""
        import torch.distributed as dist

        t0 = time.perf_counter()
        flag = torch.tensor([1 if have_batch else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return time.perf_counter() - t0, bool(flag.item())

    def allreduce(self, compute_s: float) -> float:
        """After the compute: wait the modelled exposed all-reduce; the seconds it took."""
        if self.mode != "allreduce" or self.model is None:
            return 0.0
        t0 = time.perf_counter()
        deadline = t0 + self.model.exposed(self.ranks.world_size, compute_s)
        while (left := deadline - time.perf_counter()) > 0:
            time.sleep(left)
        return time.perf_counter() - t0
