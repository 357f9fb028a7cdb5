"""Prediction against measurement: each cell of a sweep predicted without its own end-to-end rate.

For cell *i* the model (:func:`model.loader_rate`) gets:

- from the cell's configuration: workers and the host's usable cores;
- from the cell's own timers, costs rather than rates: the readers' thread CPU time per sample
  and the consumer's step time per sample (an emulated accelerator's sleep overshoots its
  nominal demand by a scheduler tick now and then; the step timer has the true figure);
- from the OTHER cells only (leave-one-out :func:`calibrate.calibrate`): the CPU per sample
  outside the stage timers (the loader's overhead, the training process's share), and the
  tier's fetch bandwidth (cells of the same tier); a tier measured by no other cell falls back
  to the cell's own fetch ceiling (diagnose, measured before the run and apart from it), then
  to a throttled tier's configured cap.

Error = predicted / measured - 1, for samples/s and AU.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .calibrate import CellFacts, Figure, calibrate, tier_bandwidth
from .model import loader_rate


@dataclass(frozen=True)
class CellCheck:
    cell: str
    run: str
    tier: str
    workers: int
    measured_samples_per_s: float
    predicted_samples_per_s: float | None
    error: float | None  # predicted / measured - 1
    measured_au: float
    predicted_au: float | None
    au_error: float | None
    predicted_binding: str | None
    measured_verdict: str
    inputs: dict[str, str]  # each model input and where it came from
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _fetch_figure(cell: CellFacts, others: list[CellFacts]) -> Figure | None:
    same_tier = [c for c in others if c.tier == cell.tier]
    figure = tier_bandwidth(same_tier) if same_tier else None
    if figure is not None:
        return figure
    if cell.fetch_ceiling_bytes_per_s:
        return Figure(cell.fetch_ceiling_bytes_per_s, "this cell's own fetch ceiling (diagnose)")
    if cell.throttle_bytes_per_s:
        return Figure(cell.throttle_bytes_per_s, "the throttled tier's configured bandwidth")
    return None


def check_cell(cell: CellFacts, cells: list[CellFacts]) -> CellCheck:
    """``cell`` predicted from ``cells`` without itself."""
    others = [c for c in cells if c.cell_id != cell.cell_id or c.run != cell.run]
    cal = calibrate(others, loader=cell.loader, batch=cell.batch_size)
    base = dict(
        cell=cell.cell_id,
        run=cell.run,
        tier=cell.tier,
        workers=cell.workers,
        measured_samples_per_s=cell.samples_per_s,
        measured_au=cell.au,
        measured_verdict=cell.verdict,
    )
    consumer = cell.consumer_rate
    if not consumer:
        return CellCheck(
            **base,
            predicted_samples_per_s=None,
            error=None,
            predicted_au=None,
            au_error=None,
            predicted_binding=None,
            inputs={},
            note="no consumer rate known: not predicted",
        )
    overhead_ms = cal.overhead_ms.value if cal.overhead_ms else 0.0
    main_ms = cal.main_ms.value if cal.main_ms else 0.0
    inputs = {
        "cpu per sample": f"{sum(cell.cpu_ms.values()):.3f} ms, this cell's stage timers (thread CPU)",
        "loader overhead": f"{overhead_ms:.3f} ms per sample, "
        + (cal.overhead_ms.source if cal.overhead_ms else "no other CPU-bound cell with workers < cores: 0"),
        "training process": f"{main_ms:.3f} ms per sample, "
        + (cal.main_ms.source if cal.main_ms else "no other CPU-bound cell with workers >= cores: 0"),
        "cores": f"{cell.cores}, the host's usable CPUs",
        "consumer": f"{consumer:,.0f} samples/s, "
        + ("this cell's step timer" if cell.compute_s_per_sample else "the configured demand"),
    }
    fetch = _fetch_figure(cell, others)
    fetch_rate = math.inf
    if fetch is not None and fetch.lower_bound:
        inputs["fetch"] = f"at least {fetch.value / 1e6:,.1f} MB/s ({fetch.source}): not limiting"
    elif fetch is not None and cell.sample_bytes:
        fetch_rate = fetch.value / cell.sample_bytes
        inputs["fetch"] = f"{fetch.value / 1e6:,.1f} MB/s = {fetch_rate:,.0f} samples/s, {fetch.source}"
    else:
        inputs["fetch"] = "not measured by any other cell: not limiting"
    p = loader_rate(
        workers=cell.workers,
        cores=cell.cores,
        cpu_s_per_sample=(sum(cell.cpu_ms.values()) + overhead_ms) / 1000.0,
        main_s_per_sample=main_ms / 1000.0,
        fetch_rate=fetch_rate,
        demand=consumer,
    )
    return CellCheck(
        **base,
        predicted_samples_per_s=p.samples_per_s,
        error=p.samples_per_s / cell.samples_per_s - 1.0,
        predicted_au=p.au,
        au_error=p.au / cell.au - 1.0 if p.au is not None and cell.au else None,
        predicted_binding=p.binding,
        inputs=inputs,
    )


def check_cells(cells: list[CellFacts]) -> list[CellCheck]:
    """Every cell of ``cells`` checked against the others."""
    return [check_cell(c, cells) for c in cells]
