"""How a cache and the backend behind it share the reads, as measured.

Two rules bound what a cache serving a share ``h`` of the reads at ``c`` and a backend serving the
rest at ``b`` deliver together (model.py): **times add** (``1 / (h/c + (1-h)/b)``: every sample
waits for its own read, one after the other, or the two share one bottleneck such as the host's
CPU) and **concurrent service** (``min(c/h, b/(1-h))``: many readers keep both busy at once and
nothing else is shared). Sweeps on the lab with a shard cache at hit ratios near 0.3, 0.6 and 0.9
and 1-8 readers measured between them (docs/recommend.md, *Cache and backend*): times add predicted
20 of 24 cells within 15 % and never above the measurement by more than 3 %; concurrent service 17,
up to 88 % above. So recommend prices a cache with times adding and shows, as the other end of a
range, what concurrent service would give, until ``--results`` of such a sweep on the target's own
storage measures which holds there (:func:`fit`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .model import backend_needed, concurrent_rate, mixed_rate

if TYPE_CHECKING:
    from iobench.results.summary import CellManifest, CellSummary

RuleName = Literal["harmonic", "concurrent"]
RULES: dict[RuleName, str] = {"harmonic": "times add", "concurrent": "concurrent service"}
WITHIN = 0.15  # a rule that predicts every partial-hit cell within this is taken as measured
LAB_SAID = (
    "times add, as the lab's sweeps measured it (docs/recommend.md, 'Cache and backend': within 15 % in 20 "
    "of 24 cells at hit ratios 0.3-0.9 and 1-8 readers, low by up to 32 % at 0.9 with several readers); "
    "the other end of the range is concurrent service, which a node whose cache and backend share nothing "
    "may reach: a sweep with a partial-hit cache on your storage (--results) narrows it"
)


@dataclass(frozen=True)
class MixRule:
    """The rule recommend prices a cache + backend with, and whether a sweep narrowed it to one."""

    rule: RuleName = "harmonic"
    narrowed: bool = False
    said: str = LAB_SAID

    def rate(self, hit: float, cache: float, backend: float) -> float:
        return _rate(self.rule, hit, cache, backend)

    def range(self, hit: float, cache: float, backend: float) -> tuple[float, float]:
        """(low, high): the point itself once narrowed, else both rules' rates."""
        if self.narrowed:
            point = self.rate(hit, cache, backend)
            return point, point
        both = sorted((mixed_rate(hit, cache, backend), concurrent_rate(hit, cache, backend)))
        return both[0], both[1]

    def needed(self, target: float, hit: float, cache: float | None) -> float | None:
        """The backend rate this rule needs for ``target`` (model.backend_needed)."""
        return backend_needed(target, hit, cache, concurrent=self.rule == "concurrent")

    def needed_range(self, target: float, hit: float, cache: float | None) -> tuple[float, float] | None:
        """The backend rate needed under each rule (low, high); None where either cannot."""
        if self.narrowed:
            n = self.needed(target, hit, cache)
            return (n, n) if n is not None else None
        a = backend_needed(target, hit, cache, concurrent=True)
        b = backend_needed(target, hit, cache)
        return (a, b) if a is not None and b is not None else None


def _rate(rule: str, hit: float, cache: float, backend: float) -> float:
    return concurrent_rate(hit, cache, backend) if rule == "concurrent" else mixed_rate(hit, cache, backend)


@dataclass(frozen=True)
class MixCell:
    """One cell with a partial-hit cache, predicted from its run's cache-alone and backend-alone
    cells at the same reader count: each the median samples/s of its epochs after the first (the
    cache warm; the median keeps one epoch disturbed by another process from deciding)."""

    run: str
    cell: str
    readers: int
    hit: float  # the median measured hit ratio of its epochs after the first
    measured: float
    cache_alone: float
    backend_alone: float

    def predicted(self, rule: str) -> float:
        return _rate(rule, self.hit, self.cache_alone, self.backend_alone)

    def error(self, rule: str) -> float:
        return self.predicted(rule) / self.measured - 1.0


def _key(summary: CellSummary, manifest: CellManifest | None) -> tuple:
    """What pairs a cached cell with its cache-alone and backend-alone cells: the tier's URL, its
    throttle and the readers (over every run given: rounds of one sweep pool)."""
    tier = getattr(manifest, "tier", None) or {}
    throttle = (tier.get("throttle") or {}).get("bandwidth_bytes_per_s")
    return tier.get("url") or tier.get("path"), throttle, summary.cell.loader.workers


def mix_cells(run_dirs: Iterable[str | Path]) -> list[MixCell]:
    """Every ok cell of ``run_dirs`` whose warm epochs hit its shard cache for 5-95 % of the reads,
    with cells of the same tier URL, throttle and readers that hit it for all (the cache alone) and
    that have no cache (the backend alone), their medians over the runs given."""
    from iobench.results.store import cell_summaries, read_manifest

    groups: dict[tuple, dict[str, list]] = {}
    for run_dir in map(Path, run_dirs):
        for s in cell_summaries(run_dir):
            if not s.ok or len(s.epochs) < 2:
                continue
            manifest = read_manifest(run_dir, s.cell_id)
            warm = s.epochs[1:]
            cached = ((getattr(manifest, "tier", None) or {}).get("cache") or {}).get("limit_bytes")
            hits = [e.cache_hit_ratio for e in warm if e.cache_hit_ratio is not None]
            hit = statistics.median(hits) if hits else None
            kind = "backend" if not cached else "cache" if hit is not None and hit >= 0.99 else "partial"
            if kind == "partial" and (hit is None or not 0.05 <= hit <= 0.95):
                continue
            rate = statistics.median(e.samples_per_s for e in warm)
            groups.setdefault(_key(s, manifest), {}).setdefault(kind, []).append((run_dir.name, s, rate, hit))
    out = []
    for g in groups.values():
        if not (g.get("backend") and g.get("cache")):
            continue
        backend = statistics.median(r for *_, r, _ in g["backend"])
        cache = statistics.median(r for *_, r, _ in g["cache"])
        for run, s, rate, hit in g.get("partial", []):
            out.append(MixCell(run, s.cell_id, max(1, s.cell.loader.workers), hit, rate, cache, backend))
    return out


def fit(cells: list[MixCell], default: MixRule | None = None) -> MixRule:
    """The rule ``cells`` measured: the one whose largest error is the smaller, narrowed to it when
    that is within WITHIN; without such cells, ``default``."""
    default = default or MixRule()
    if not cells:
        return default
    worst = {rule: max(abs(c.error(rule)) for c in cells) for rule in RULES}
    best, other = sorted(worst, key=worst.__getitem__)
    runs = ", ".join(sorted({c.run for c in cells}))
    said = (
        f"{RULES[best]}, as {len(cells)} partial-hit cell(s) of --results ({runs}) measured it: every cell "
        f"within {worst[best]:.0%} ({RULES[other]}: {worst[other]:.0%})"
    )
    if worst[best] <= WITHIN:
        return MixRule(best, narrowed=True, said=said)
    return replace(default, said=f"{default.said}; --results did not narrow it: {said}, beyond {WITHIN:.0%}")
