"""A checkpoint cell's saves and restores around its step loop: the state the trainer holds (a
synthetic one of the cell's size for an emulated accelerator; a real model's parameters and optimizer
state, filled up to the size), saved every K steps to the cell's destination in its mode, then the
last checkpoint restored cold and warm; its figures from the run's ledger (analysis/checkpointcost.py).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from typing import Any

import torch

from iobench.analysis.checkpointcost import checkpoint_cost, save_transfer, transfer
from iobench.analysis.checkpointverdict import sentence
from iobench.cell.live import live_file
from iobench.cell.ranks.distributed import Ranks
from iobench.checkpoint.checkpointer import Checkpointer
from iobench.checkpoint.fioref import FioFigures, fio_reference
from iobench.checkpoint.state import state_bytes, synthetic_state
from iobench.checkpoint.targets import Target, make_target
from iobench.checkpoint.timing import Timed, timed_load, timed_save
from iobench.results.checkpoint import CheckpointFigures, CheckpointSettings, SaveFigures, TransferFigures
from iobench.results.figures import StepAccount
from iobench.results.known import every_known


def model_state(consumer: Any) -> dict[str, Any]:
    """A real model's own state as it stands: its parameters and buffers, and its optimizer's
    momentum (live tensors: a sync save writes them, an async one stages a copy first)."""
    model = getattr(consumer, "model", None)
    if not isinstance(model, torch.nn.Module):
        return {}
    own = {f"model.{k}": v for k, v in model.state_dict().items()}
    for name, p in model.named_parameters():
        buf = consumer.optimizer.state.get(p, {}).get("momentum_buffer")
        if buf is not None:
            own[f"optim.momentum.{name}"] = buf
    return own


def filler_bytes(consumer: Any, nbytes: int, world_size: int) -> int:
    """The synthetic layers' bytes beside a real model's own state (its parameters and as much
    again of momentum, on every rank), so the checkpoint is ``nbytes`` in all."""
    model = getattr(consumer, "model", None)
    own = 2 * state_bytes(dict(model.state_dict())) if isinstance(model, torch.nn.Module) else 0
    return max(0, nbytes - own * world_size)


# what one rank hands rank 0: its saves, their requests' seconds, its device bytes while saving,
# its cold and warm restores (None: not restored) and its save with nothing else running
_RankFigures = tuple[list[SaveFigures], list[float], int | None, tuple[Timed, Timed] | None, Timed]


class CellCheckpoints:
    """The checkpointer of one rank of a checkpoint cell, and its figures after the loop."""

    def __init__(self, settings: CheckpointSettings, consumer: Any, ranks: Ranks, cell_id: str) -> None:
        self.settings, self.consumer, self.ranks, self.cell_id = settings, consumer, ranks, cell_id
        # each cell under a directory (prefix) of its own: cells never meet each other's checkpoints
        here = replace(
            settings.destination, location=f"{settings.destination.location.rstrip('/')}/{cell_id}"
        )
        self.target: Target = make_target(here)
        if ranks.rank == 0:  # what an earlier attempt of this cell left (the ranks start after a barrier)
            self.target.clear()
        group, mesh = None, None
        if ranks.distributed:  # a group of its own: a background save's collectives never meet training's
            import torch.distributed as dist
            from torch.distributed.device_mesh import init_device_mesh

            group = dist.new_group(backend="gloo")
            mesh = init_device_mesh("cpu", (ranks.world_size,))
        self.group = group
        nbytes = filler_bytes(consumer, settings.state_bytes, ranks.world_size)
        self.filler = synthetic_state(nbytes, ranks.rank, ranks.world_size, mesh)
        self.checkpointer: Checkpointer | None = None

    def state(self) -> dict[str, Any]:
        return {**self.filler, **model_state(self.consumer)}

    def start(self, origin: float) -> Checkpointer:
        self.checkpointer = Checkpointer(
            self.target,
            self.settings.mode,
            self.settings.every_steps,
            self.state,
            origin=origin,
            rank=self.ranks.rank,
            group=self.group,
            keep=self.settings.keep,
            on_saved=live.on_checkpoint if (live := live_file()) else None,
        )
        return self.checkpointer

    def finish(self, entries: tuple[StepAccount, ...], ranks_per_node: int) -> CheckpointFigures:
        """The saves waited for, the last checkpoint restored cold then warm, every rank's figures
        gathered (rank 0's are the cell's), the cell's checkpoints removed."""
        assert self.checkpointer is not None
        saver = self.checkpointer
        saves = saver.close()  # closed already after the loop: the saves it recorded
        restores: tuple[Timed, Timed] | None = None
        if self.settings.restore and saver.committed:
            name = saver.committed[-1]
            cold_t, _ = timed_load(self.target, self.state(), name, cold=True, group=self.group)
            warm_t, _ = timed_load(self.target, self.state(), name, cold=False, group=self.group)
            restores = (cold_t, warm_t)
        alone = timed_save(self.target, self.state(), "alone", group=self.group)
        mine = (saves, saver.request_seconds, saver.device_bytes, restores, alone)
        everyone: list[_RankFigures] = self.ranks.gather(mine) or [mine]
        if self.ranks.rank == 0:
            for name in [*saver.committed, "alone"]:
                self.target.remove(self.target.checkpoint_id(name))  # the cell's checkpoints go with it
        all_saves = [s for rank in everyone for s in rank[0]]
        cold = warm = None
        restored = [pair for rank in everyone if (pair := rank[3]) is not None]
        if len(restored) == len(everyone):
            cold, warm = (_restore([pair[i] for pair in restored], ranks_per_node) for i in (0, 1))
        figures = CheckpointFigures(
            settings=self.settings,
            writer=self.target.writer_name,
            where=self.target.where.replace(
                f"/{self.cell_id}", ""
            ),  # the destination, not the cell's directory
            saves=tuple(all_saves),
            save=save_transfer(
                all_saves,
                [t for rank in everyone for t in rank[1]],
                ranks_per_node,
                _total([rank[2] for rank in everyone]),
            ),
            restore_cold=cold,
            restore_warm=warm,
            cold_method=restores[0].cold or "" if restores else "not restored",
            cost=checkpoint_cost(entries, saver.background(), self.settings.every_steps, len(saves)),
            verdict="",
            ranks_per_node=ranks_per_node,
            nodes=max(1, self.ranks.world_size // max(1, ranks_per_node)),
            save_alone=_restore([rank[4] for rank in everyone], ranks_per_node),
        )
        fio = self._fio()
        return replace(
            figures,
            verdict=sentence([figures]),
            fio_write_gb_per_s=fio.write_gb_per_s if fio else None,
            fio_read_gb_per_s=fio.read_gb_per_s if fio else None,
        )

    def _fio(self) -> FioFigures | None:
        """fio on the checkpoint's own device, the state's size, for a local file store (rank 0)."""
        root = getattr(getattr(self.target, "store", None), "root", None)
        if root is None or not self.target.local or self.ranks.rank != 0:
            return None
        os.makedirs(root, exist_ok=True)
        try:
            return fio_reference(str(root), self.settings.state_bytes)
        finally:
            with contextlib.suppress(OSError):
                os.rmdir(root)


def _restore(per_rank: list[Timed], ranks_per_node: int) -> TransferFigures:
    """One timed restore (or save) of every rank: each its seconds and bytes, their requests, their
    device bytes."""
    return transfer(
        [[t.seconds] for t in per_rank],
        [[t.bytes] for t in per_rank],
        [s for t in per_rank for s in t.requests.seconds],
        ranks_per_node,
        _total([t.device_bytes for t in per_rank]),
    )


def _total(device_bytes: list[int | None]) -> int | None:
    """The ranks' device bytes together; None when any rank could not read its own."""
    known = every_known(device_bytes)
    return None if known is None else sum(known)
