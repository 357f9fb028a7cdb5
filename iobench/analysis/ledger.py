"""One ledger per step: every second of a cell's wall in exactly one named part.

A step's account runs from the end of its rank's previous step (a rank's first step: its own start)
to its end, so a rank's accounts tile its time without gaps or overlaps. Inside it, in the order a
step runs them: the step loop's own bookkeeping; the wait for the batch (the loader opening an
epoch, the batch's making by stage, its hand-over); the wait for the slowest rank; the
host-to-device copy; the device busy and the trainer's host time beyond it; the modelled
all-reduce. Every figure of a cell (AU, stall, the wall split, epochs, the MLPerf view, rank figures)
is a sum over these accounts (analysis/cellfigures.py), so the figures cannot disagree.

How a wait is split: the part before the batch's maker had made it (its ``ready_s`` stamp) was
spent making it, shared over the stages in proportion to the batch's readers' time in each; the
part after was its hand-over (a batch already made, on its way through the worker's queue,
unpickled, pinned). Where the loader stamps no making, the whole wait is making.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from iobench.results.figures import ACCOUNT_PARTS, StepAccount, StepAlone, StepRow, WallSplit

STAGE_PARTS = ("fetch", "decode", "augment", "collate")


def device_busy(row: StepRow, cap: float = math.inf) -> float:
    """The device's busy time in ``row``'s step: its measured device time (an emulated device's, CUDA
    events' span, the step itself on CPU), never more than the step, and capped at ``cap``, the
    device span of the step alone: a CUDA span counts the device's idle gaps while a slow host
    launches the step's kernels, and the device's work per step does not depend on the host."""
    measured = row.compute_s if row.device_s is None else row.device_s
    return max(0.0, min(measured, cap, row.compute_s))


def device_cap(alone: StepAlone | None) -> float:
    """The most a step's device busy can be: the device span of the step alone, where measured."""
    return alone.device_s if alone is not None and alone.device_s is not None else math.inf


def _stage_walls(row: StepRow) -> tuple[float, ...] | None:
    fetch, decode, augment, collate = row.fetch_wait_s, row.decode_s, row.augment_s, row.collate_s
    if fetch is None or decode is None or augment is None or collate is None:
        return None
    walls = (fetch, decode, augment, collate)
    return walls if sum(walls) > 0 else None


def account(
    row: StepRow, opened_at: float, cap: float = math.inf, shares: Sequence[float] | None = None
) -> StepAccount:
    """``row``'s account from ``opened_at`` (its rank's previous step's end). ``shares``: the stages'
    shares of the readers' time over the cell, for a batch that carries no stage times of its own."""
    open_s = min(row.open_s, row.wait_s)
    rest = row.wait_s - open_s
    asked = row.t_start + open_s
    making = rest if row.ready_s is None else min(rest, max(0.0, row.ready_s - asked))
    walls = _stage_walls(row)
    if walls is None and shares is not None and sum(shares) > 0:
        walls = tuple(shares)
    stages = dict.fromkeys(STAGE_PARTS, 0.0)
    unsplit = 0.0
    if walls is None:
        unsplit = making
    else:
        total = sum(walls)
        stages = {s: making * w / total for s, w in zip(STAGE_PARTS, walls, strict=True)}
    device = device_busy(row, cap)
    parts = dict(
        loader_start=open_s,
        **stages,
        unsplit=unsplit,
        handover=rest - making,
        peer_wait=row.peer_wait_s,
        h2d=row.h2d_s,
        device=device,
        host=row.compute_s - device,
        allreduce=row.allreduce_s,
        checkpoint=row.checkpoint_s,
    )
    start = min(opened_at, row.t_start)
    return StepAccount(
        rank=row.rank,
        epoch=row.epoch,
        step=row.step,
        warmup=row.warmup,
        start_s=start,
        end_s=row.t_end,
        samples=row.samples,
        bytes_read=row.bytes_read,
        loop=(row.t_end - start) - sum(parts.values()),
        **parts,
        trainer_cpu_s=row.trainer_cpu_s,
        reader_cpu_s=row.reader_cpu_s,
        delivered=True,  # a whole step delivers its batch; said here so that ``parts`` fills only seconds
    )


def ledger(
    rows: Sequence[StepRow], alone: StepAlone | None = None, shares: Sequence[float] | None = None
) -> tuple[StepAccount, ...]:
    """Every row's account, in the rows' order; each rank's accounts tile its time. ``alone`` caps
    the device busy per step (its device span), ``shares`` as in :func:`account`."""
    cap = device_cap(alone)
    last_end: dict[int, float] = {}
    out = []
    for row in rows:
        entry = account(row, last_end.get(row.rank, row.t_start), cap, shares)
        last_end[row.rank] = row.t_end
        out.append(entry)
    return tuple(out)


def clipped(entry: StepAccount, start: float, end: float) -> StepAccount | None:
    """The part of ``entry`` inside [start, end], each part clipped where it ran (in the order of
    ACCOUNT_PARTS; the device busy and the host's time beyond it share the step in proportion);
    None when none of it is inside."""
    if entry.end_s <= start or entry.start_s >= end:
        return None
    if entry.start_s >= start and entry.end_s <= end:
        return entry
    kept: dict[str, Any] = {}  # seconds by the part's field name (ACCOUNT_PARTS)
    t = entry.start_s
    for part in ACCOUNT_PARTS:
        if part == "host":
            continue  # run together with the device busy, below
        seconds = getattr(entry, part) + (entry.host if part == "device" else 0.0)
        inside = max(0.0, min(t + seconds, end) - max(t, start))
        if part == "device":
            share = inside / seconds if seconds > 0 else 0.0
            kept["device"], kept["host"] = entry.device * share, entry.host * share
        else:
            kept[part] = inside
        t += seconds
    kept_start, kept_end = max(entry.start_s, start), min(entry.end_s, end)
    share = (kept_end - kept_start) / entry.span_s if entry.span_s > 0 else 0.0
    cut = entry.end_s > end  # before the step's end, where it delivers its batch
    return replace(
        entry,
        start_s=kept_start,
        end_s=kept_end,
        **kept,
        trainer_cpu_s=None if entry.trainer_cpu_s is None else entry.trainer_cpu_s * share,
        reader_cpu_s=entry.reader_cpu_s * share,
        samples=0 if cut else entry.samples,
        bytes_read=0 if cut else entry.bytes_read,
        delivered=False if cut else entry.delivered,
    )


@dataclass(frozen=True)
class Totals:
    """Accounts summed: seconds per part, the span they cover, steps, samples and bytes."""

    span_s: float
    steps: int
    samples: int
    bytes_read: int
    seconds: dict[str, float]

    def __getitem__(self, part: str) -> float:
        return self.seconds[part]

    @property
    def wait(self) -> float:
        return sum(self.seconds[p] for p in ("loader_start", *STAGE_PARTS, "unsplit", "handover"))

    @property
    def compute(self) -> float:
        return self.seconds["device"] + self.seconds["host"]

    @property
    def au(self) -> float:
        """Device busy over the span: the cell's AU (docs/method.md)."""
        return self.seconds["device"] / self.span_s if self.span_s > 0 else 0.0

    def split(self) -> WallSplit:
        """The fractions of the span per part; they sum to 1."""
        share = {p: (s / self.span_s if self.span_s > 0 else 0.0) for p, s in self.seconds.items()}
        return WallSplit(wall_s=self.span_s, **share)


def totals(entries: Iterable[StepAccount], span_s: float | None = None) -> Totals:
    """``entries`` summed. ``span_s``: the span they stand for, when it is more than their own (the
    ranks' common interval times the ranks: a rank with no step over part of it spent that part
    outside any step, in the step loop)."""
    entries = list(entries)
    seconds: dict[str, float] = {p: float(sum(getattr(e, p) for e in entries)) for p in ACCOUNT_PARTS}
    own = float(sum(e.span_s for e in entries))
    if span_s is not None and span_s > own:
        seconds["loop"] += span_s - own
    return Totals(
        span_s=max(own, span_s or 0.0),
        steps=sum(e.delivered for e in entries),
        samples=int(sum(e.samples for e in entries)),
        bytes_read=int(sum(e.bytes_read for e in entries)),
        seconds=seconds,
    )
