"""What checkpoints cost a training loop, from the same step ledger as every other figure
(analysis/ledger.py; docs/method.md, Checkpoints).

A measured step is *blocked* when its account holds checkpoint seconds (the loop waited for a save
as the step ended), *slowed* when it ran while a background write did (an asynchronous save's
thread competing for the cores, memory bandwidth and page cache), and *clean* otherwise. AU with
checkpoints is device busy over the wall of every measured step; AU without is the same over the
clean steps alone; their difference is what checkpointing cost the accelerators. The slowed steps
are shown apart: how much longer they took than a clean step, and what those extra seconds cost.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from iobench.results.checkpoint import CheckpointCost, SaveFigures, TransferFigures
from iobench.results.figures import Latency, StepAccount

from .ledger import totals


def _overlaps(entry: StepAccount, spans: Sequence[tuple[float, float]]) -> bool:
    return any(entry.start_s < end and entry.end_s > start for start, end in spans)


def checkpoint_cost(
    entries: Sequence[StepAccount], background: Sequence[tuple[float, float]], every_steps: int, saves: int
) -> CheckpointCost | None:
    """The cost over ``entries``' measured steps; ``background`` the (start, end) of each background
    write in the ledger's seconds. None without a measured step."""
    measured = [e for e in entries if not e.warmup]
    if not measured:
        return None
    blocked = [e for e in measured if e.checkpoint > 0]
    slowed = [e for e in measured if e.checkpoint == 0 and _overlaps(e, background)]
    clean = [e for e in measured if e.checkpoint == 0 and not _overlaps(e, background)]
    whole = totals(measured)
    au_with = whole.au
    au_without = totals(clean).au if clean else None
    clean_span = statistics.fmean(e.span_s for e in clean) if clean else None
    slowed_ratio = statistics.fmean(e.span_s for e in slowed) / clean_span if slowed and clean_span else None
    extra = sum(max(0.0, e.span_s - clean_span) for e in slowed) if slowed and clean_span else 0.0
    blocked_s = sum(e.checkpoint for e in blocked)
    return CheckpointCost(
        saves=saves,
        every_steps=every_steps,
        blocked_s_per_save=blocked_s / len(blocked) if blocked else 0.0,
        blocked_fraction=blocked_s / whole.span_s if whole.span_s > 0 else 0.0,
        slowed_steps=len(slowed),
        slowed_step_ratio=slowed_ratio,
        slowed_extra_fraction=extra / whole.span_s if whole.span_s > 0 else 0.0,
        au_with=au_with,
        au_without=au_without,
        cost=max(0.0, au_without - au_with) if au_without is not None else None,
        clean_step_s=clean_span,
    )


def latency(seconds: Sequence[float]) -> Latency:
    """p50/p95/p99 of request times, in ms."""
    if not seconds:
        return Latency()
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return Latency(p50=at(0.50), p95=at(0.95), p99=at(0.99), n=len(ordered))


def transfer(
    per_rank_seconds: Sequence[Sequence[float]],
    per_rank_bytes: Sequence[Sequence[int]],
    request_s: Sequence[float],
    ranks_per_node: int,
    device_bytes: int | None = None,
) -> TransferFigures:
    """Saves or restores of every rank (``per_rank_*[r][i]``: rank r's i-th): per rank its bytes over its
    own seconds; per node, a node's ranks' bytes over the slowest one's seconds, both means over the
    saves."""
    count = min(len(s) for s in per_rank_seconds) if per_rank_seconds else 0
    if count == 0:
        return TransferFigures(0, 0, 0.0, 0.0, 0.0, 0.0, latency(request_s), device_bytes)
    slowest = [max(s[i] for s in per_rank_seconds) for i in range(count)]
    rank_rates = [
        b[i] / s[i]
        for s, b in zip(per_rank_seconds, per_rank_bytes, strict=True)
        for i in range(count)
        if s[i] > 0
    ]
    node_rates = []
    for i in range(count):
        for first in range(0, len(per_rank_seconds), ranks_per_node):
            node = range(first, min(first + ranks_per_node, len(per_rank_seconds)))
            seconds = max(per_rank_seconds[r][i] for r in node)
            if seconds > 0:
                node_rates.append(sum(per_rank_bytes[r][i] for r in node) / seconds)
    return TransferFigures(
        count=count,
        bytes=int(sum(sum(b[:count]) for b in per_rank_bytes)),
        seconds_mean=statistics.fmean(slowest),
        seconds_max=max(slowest),
        gb_per_s_per_rank=statistics.fmean(rank_rates) / 1e9 if rank_rates else 0.0,
        gb_per_s_per_node=statistics.fmean(node_rates) / 1e9 if node_rates else 0.0,
        request_ms=latency(request_s),
        device_bytes=device_bytes,
    )


def save_transfer(
    saves: Sequence[SaveFigures], request_s: Sequence[float], ranks_per_node: int, device_bytes: int | None
) -> TransferFigures:
    """The saves' figures: each one's write seconds (its start to its commit) per rank."""
    ranks = sorted({s.rank for s in saves})
    seconds = [[s.write_s for s in saves if s.rank == r] for r in ranks]
    nbytes = [[s.bytes for s in saves if s.rank == r] for r in ranks]
    return transfer(seconds, nbytes, request_s, ranks_per_node, device_bytes)
