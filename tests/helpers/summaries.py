"""Typed cell records for tests that need a result without measuring one: a plausible cell spec and
summary, with the figures a test cares about given and the rest filled in consistently."""

from __future__ import annotations

from iobench.analysis.repeats import summarize
from iobench.results.figures import CacheState, PipelineMetrics, Verdict
from iobench.results.spec import AcceleratorSpec, CellSpec, LoaderSettings, RunSettings
from iobench.results.summary import CellSummary, Stability


def cell_spec(cell_id: str = "disk-torch-w2", *, tier: str = "disk", workers: int = 2, **run) -> CellSpec:
    return CellSpec(
        cell_id=cell_id,
        tier={"name": tier, "kind": "local", "path": "/data"},
        loader=LoaderSettings(kind="torch", workers=workers, batch_size=64),
        accelerator=AcceleratorSpec(
            kind="emulated", type="h100", model="resnet50", demand="training", count=1
        ),
        cache="cold",
        run=RunSettings(**run),
        dataset="/data",
    )


def metrics(samples_per_s: float, *, au: float | None = None, wall_s: float = 10.0) -> PipelineMetrics:
    au = samples_per_s / 1000 if au is None else au
    samples = int(samples_per_s * wall_s)
    return PipelineMetrics(
        steps=max(1, samples // 64),
        samples=samples,
        wall_s=wall_s,
        samples_per_s=samples_per_s,
        bytes_read=samples * 110_000,
        bytes_per_s=samples_per_s * 110_000,
        wait_s=(1 - au) * wall_s,
        h2d_s=0.0,
        compute_s=au * wall_s,
        au=au,
        au_mlperf=au,
        stall_fraction=1 - au,
        wait_p50_ms=10.0,
        wait_p95_ms=20.0,
        wait_p99_ms=30.0,
        wait_max_ms=40.0,
        time_to_first_batch_s=0.5,
    )


def ok_summary(
    cell_id: str,
    samples_per_s: float,
    *,
    runs: list[float] | None = None,
    bound: str = "prep",
    binding_stage: str | None = "decode",
    cell: CellSpec | None = None,
) -> CellSummary:
    """A measured cell; ``runs`` gives each repeat's samples/s (the summary's is their median)."""
    stability = None
    if runs:
        stability = Stability(samples_per_s=summarize(runs), au=summarize([r / 1000 for r in runs]))
    return CellSummary(
        status="ok",
        cell=cell or cell_spec(cell_id),
        metrics=metrics(samples_per_s),
        verdict=Verdict(bound=bound, binding_stage=binding_stage, headline=f"{bound}-bound"),
        cache_state=CacheState("cold", "posix_fadvise(DONTNEED)", 0, 1000, 0.0, "cold", ""),
        stability=stability,
    )


def failed_summary(
    cell_id: str, error: str = "TierConfigError: gone", cell: CellSpec | None = None
) -> CellSummary:
    return CellSummary.failed(cell or cell_spec(cell_id), error)
