"""The worker count that trains fastest: among cells that differ only in their loader's workers,
the one with the highest samples/s, and what each count above it cost (docs/method.md, *The
worker count that trains fastest*).

More workers feed a loader faster until they take the cores the trainer needs: past the knee a
real trainer (or an emulated one doing its host work) trains slower. A sleep-only emulation leaves
every core to the loader, so its knee comes later than a real trainer's; the finding says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from iobench.results.summary import CellSummary


@dataclass(frozen=True)
class Knee:
    group: str  # what the cells share: tier, loader, batch, accelerator, cache, ranks
    best_workers: int
    best_samples_per_s: float
    by_workers: tuple[tuple[int, float], ...]  # (workers, samples/s), ascending workers
    trainer: str  # "real" | "host-emulated" | "sleep-only"

    def lines(self) -> list[str]:
        """The finding in words: the best count, and what every count above it cost."""
        out = [
            f"{self.group}: trains fastest at {self.best_workers} worker(s), "
            f"{self.best_samples_per_s:,.0f} samples/s ({self.trainer} trainer)"
        ]
        more = [(w, r) for w, r in self.by_workers if w > self.best_workers]
        if not more and len(self.by_workers) > 1:
            out[0] += ": the most workers tried, so more may train faster still"
        if more:
            out.append(
                "  more workers cost: "
                + ", ".join(f"{w}: {100 * (r / self.best_samples_per_s - 1):+.0f} %" for w, r in more)
            )
        if self.trainer == "sleep-only":
            out.append(
                "  a sleeping accelerator leaves every core to the loader: a real trainer's knee comes at "
                "fewer workers (host_work: <model> emulates its host work)"
            )
        return out


def _trainer(s: CellSummary) -> str:
    acc = s.cell.accelerator
    if acc.kind != "emulated":
        return "real"
    return "sleep-only" if (s.consumer or {}).get("host_work", "none").startswith("none") else "host-emulated"


def _group(s: CellSummary) -> tuple:
    c = s.cell
    return (
        c.tier_name,
        c.loader.kind,
        c.loader.batch_size,
        c.accelerator,
        c.cache,
        c.run.world_size,
        c.dataset,
    )


def knees(summaries: list[CellSummary]) -> list[Knee]:
    """One knee per group of ok cells measured at two or more worker counts."""
    groups: dict[tuple, list[tuple[CellSummary, float]]] = {}
    for s in summaries:
        if s.ok and s.metrics is not None:
            groups.setdefault(_group(s), []).append((s, s.metrics.samples_per_s))
    out = []
    for key, cells in groups.items():
        rates: dict[int, float] = {}
        for s, rate in cells:
            w = s.cell.loader.workers
            rates[w] = max(rates.get(w, 0.0), rate)
        if len(rates) < 2:
            continue
        best = max(rates, key=lambda w: rates[w])
        tier, loader, batch, acc, cache, world = key[:6]
        out.append(
            Knee(
                group=f"{tier} / {loader} b{batch} / {acc.label} / {cache}"
                + (f" / {world} ranks" if world > 1 else ""),
                best_workers=best,
                best_samples_per_s=rates[best],
                by_workers=tuple(sorted(rates.items())),
                trainer=_trainer(cells[0][0]),
            )
        )
    return out
