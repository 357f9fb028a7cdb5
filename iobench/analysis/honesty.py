"""Honesty: say when a figure was flattered, by a cache or by a trainer lighter than asked, and how
much epoch 1 differs.

A "cold" run whose dataset was partly resident in the page cache measured RAM, not storage; a
dataset smaller than RAM stays resident unless evicted; server-side caches (RGW, OSDs, MinIO)
cannot be dropped from the client at all. An emulated trainer's fixed host work sized while
something slowed the host does less than its accelerator entry asks, and the cores it is charged
are too few. None of these is an error, but every one must be said next to the figures it affects.
"""

from __future__ import annotations

from collections.abc import Sequence

from iobench.host.cpuload import SLOWED
from iobench.host.memory import usable_memory
from iobench.results.choices import CacheMode
from iobench.results.figures import CacheState, EpochFigures, PipelineMetrics

EPOCH_DELTA_NOTE = 0.10


def epoch_delta(epochs: Sequence[EpochFigures]) -> float | None:
    """Last epoch's samples/s over epoch 1's, minus one; None with fewer than two epochs."""
    if len(epochs) < 2 or not epochs[0].samples_per_s:
        return None
    return epochs[-1].samples_per_s / epochs[0].samples_per_s - 1.0


def epoch1_vs_steady(epochs: Sequence[EpochFigures], steady_samples_per_s: float) -> float | None:
    """The steady-state rate (after the detected warm-up) over epoch 1's whole rate, minus one:
    how much start-up and cold caches cost the first epoch."""
    if not epochs or not epochs[0].samples_per_s:
        return None
    return steady_samples_per_s / epochs[0].samples_per_s - 1.0


def cache_warnings(
    requested: CacheMode,
    cache_states: Sequence[CacheState],
    epochs: Sequence[EpochFigures],
    dataset_bytes: int,
    server_caches: str | None,
) -> list[str]:
    """What the cache states say of the figures: a cold run that was not, a dataset that fits in
    RAM, ``server_caches`` (the tier's word on caches no client can drop), an epoch 1 far from the
    last."""
    out = []
    ram = usable_memory().total  # a container's memory limit bounds its page cache too
    for i, state in enumerate(cache_states):
        label = f"repeat {i + 1} of {len(cache_states)}" if len(cache_states) > 1 else "the cell"
        if requested == "cold" and state.achieved not in ("cold",):
            resident = state.resident_fraction_before
            share = (
                f"{100 * resident:.0f} % of the dataset was"
                if resident is not None
                else "the dataset may have been"
            )
            out.append(
                f"{label} was asked to be cold but was {state.achieved}: {share} in the page cache before it "
                f"started ({state.method}); its figures include cache hits, not only storage reads"
            )
    if requested == "cold" and dataset_bytes < ram and any(s.method == "none" for s in cache_states):
        out.append(
            f"the dataset ({dataset_bytes / 2**30:.1f} GiB) fits in RAM ({ram / 2**30:.0f} GiB) and "
            "was not evicted: repeated reads come from the page cache"
        )
    if server_caches is not None:
        out.append(f"limitation: {server_caches}")
    delta = epoch_delta(epochs)
    if delta is not None and abs(delta) > EPOCH_DELTA_NOTE:
        out.append(
            f"the last epoch ran {100 * delta:+.0f} % against epoch 1 (cache fill, page cache, worker start-up): "
            "quote epoch 1 for a cold start and the last epoch for sustained training"
        )
    return out


def light_work_warnings(m: PipelineMetrics) -> list[str]:
    """Where the trainer alone, timed on a quiet host, found its fixed host work ran well under the
    time it was sized to: it was sized in a slow spell, and every step of the cell did less."""
    slowed = m.trainer_alone_slowed
    if not m.trainer_alone_quiet or slowed is None or slowed * SLOWED >= 1.0:
        return []
    return [
        f"the emulated trainer's fixed host work ran {slowed:.2f}x the time it was sized to when timed alone "
        "on a quiet host: it was sized while something slowed this host, so every step did about "
        f"{100 * (1 - slowed):.0f} % less host work than its accelerator entry asks and the trainer's "
        "cores are low by as much; run the cell again"
    ]
