"""Recommend at scale: what each measured tier + loader keeps of the accelerators in synchronous
data-parallel training of W ranks, predicted from its cells' measured steps (analysis/scale.py).

A tier that feeds one accelerator can starve 512 of them: every step waits for the slowest of W
data waits, less what each rank's loader queue absorbs meanwhile. The prediction re-runs the
bootstrap and the replay through the queue at the ranks asked (``--ranks``), on every measured
one-rank cell of the ``--results`` run directories, with the all-reduce modelled on that cell's
fabric (its ``run.interconnect``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from iobench.analysis.queue import LoaderQueue
from iobench.analysis.scale import predict_at_scale
from iobench.cell.ranks.allreduce import AllReduceModel, gradient_bytes
from iobench.results.api import load_summaries, step_rows
from iobench.results.figures import ScalePoint
from iobench.results.store import STEPS_NAME

DEFAULT_RANKS = (8, 64, 512, 4096)


@dataclass(frozen=True)
class AtScale:
    cell: str  # cell id (run directory)
    tier: str
    loader: str
    workers: int
    fabric: str
    points: tuple[ScalePoint, ...]

    def sentence(self) -> str:
        first, last = self.points[0], self.points[-1]
        text = (
            f"{self.tier} + {self.loader} ({self.workers} worker(s)) holds AU {first.au:.2f} at "
            f"{first.world_size:,} ranks and {last.au:.2f} at {last.world_size:,}"
        )
        return text + (
            " (an upper bound: more ranks than measured steps)" if last.beyond_measured_tail else ""
        )


def ranks_of(text: str | None, accelerators: int) -> tuple[int, ...]:
    """``--ranks 8,64,512`` (default: the job's accelerators, then 64, 512 and 4096)."""
    if not text:
        return tuple(sorted({accelerators, *DEFAULT_RANKS}))
    try:
        ranks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise ValueError(
            f"--ranks {text!r}: expected whole numbers separated by commas, e.g. 8,64,512"
        ) from None
    if not ranks or ranks[0] < 1:
        raise ValueError(f"--ranks {text!r}: every rank count must be at least 1")
    return ranks


def at_scale(run_dirs: Sequence[str | Path], ranks: Sequence[int]) -> list[AtScale]:
    """For every ok one-rank cell with steps in ``run_dirs``: the synchronous job at ``ranks``."""
    out = []
    for run_dir in run_dirs:
        for s in load_summaries(run_dir):
            cell, fabric = s.cell, s.cell.run.interconnect
            if not s.ok or cell.run.world_size != 1 or not (Path(run_dir) / s.cell_id / STEPS_NAME).exists():
                continue
            rows = step_rows(run_dir, s.cell_id)
            model = (
                AllReduceModel(gradient_bytes(cell.accelerator.model), fabric, cell.run.allreduce_overlap)
                if fabric
                else None
            )
            points = predict_at_scale(
                rows,
                model.exposed if model else lambda world, compute: 0.0,
                queue=LoaderQueue(cell.loader.workers, cell.loader.prefetch),
                world_sizes=ranks,
            )
            out.append(
                AtScale(
                    cell=f"{s.cell_id} ({Path(run_dir).name})",
                    tier=cell.tier_name,
                    loader=cell.loader.kind,
                    workers=cell.loader.workers,
                    fabric=fabric.name if fabric else "no fabric modelled",
                    points=tuple(points),
                )
            )
    return out
