"""Per-epoch figures from the steps' accounts, so epoch 1 and the steady state can be compared.

An epoch's figures include its warm-up steps: an epoch is the unit a cache fills over. Its part
inside the measured window is kept apart (``window_s``, ``window_au``), so the epochs, weighted by
their window seconds, give the cell's own AU. The accounts may come from several ranks on a common
clock: an epoch's wall is then from its first account's start to its last's end, and its shares
are over every rank's time.
"""

from __future__ import annotations

from collections.abc import Sequence

from iobench.results.figures import EpochFigures, Latency, StepAccount
from loaders import StageStats
from loaders.observe import CacheStats, RequestCounts

from .ledger import totals
from .metrics import epoch_dlio_au


def epoch_figures(
    entries: Sequence[StepAccount], window: Sequence[StepAccount], stats: Sequence[StageStats]
) -> tuple[EpochFigures, ...]:
    """One record per epoch that ran a step: ``entries`` every step's account, ``window`` the measured
    window's (clipped to the common interval in a multi-rank cell), ``stats`` the loader's counters per
    epoch (an epoch that ran no step has none to show)."""
    out = []
    ranks = max(1, len({e.rank for e in entries}))
    for epoch, epoch_stats in enumerate(stats):
        mine = [e for e in entries if e.epoch == epoch]
        if not mine:
            continue
        wall = max(e.end_s for e in mine) - min(e.start_s for e in mine)
        whole = totals(mine)
        inside = totals(e for e in window if e.epoch == epoch)
        c = epoch_stats.counters
        cache, requests = c.cache or CacheStats(), c.requests or RequestCounts()
        hits, misses = cache.hits, cache.misses
        samples = sum(e.samples for e in mine)
        out.append(
            EpochFigures(
                epoch=epoch,
                steps=len(mine),
                samples=samples,
                wall_s=wall,
                samples_per_s=samples / wall if wall > 0 else 0.0,
                bytes_read=epoch_stats.bytes_read,
                bytes_per_s=epoch_stats.bytes_read / wall if wall > 0 else 0.0,
                stall_fraction=whole.wait / whole.span_s if whole.span_s > 0 else 0.0,
                cache_hits=hits,
                cache_misses=misses,
                cache_hit_ratio=hits / (hits + misses) if hits + misses else None,
                cache_evictions=cache.evictions,
                bytes_transferred=requests.bytes_transferred,
                requests=requests.requests,
                retries=requests.retries,
                request_latency_ms=Latency(**epoch_stats.as_dict()["request_latency_ms"]),
                au=whole.au if whole.span_s > 0 else None,
                au_mlperf=epoch_dlio_au(mine),
                window_s=inside.span_s / ranks,
                window_au=inside.au if inside.span_s > 0 else None,
                expected_samples=c.epoch_samples_expected,
            )
        )
    return tuple(out)
