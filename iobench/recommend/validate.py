"""Prediction against measurement: each cell of a sweep predicted without its own end-to-end rate.

For cell *i* the model (:func:`model.loader_rate`) gets:

- from the cell's configuration: workers and the host's usable cores;
- from the cell's own timers, costs rather than rates: the readers' thread CPU time per sample,
  the trainer's step timed alone per sample (an emulated accelerator's sleep overshoots its
  nominal demand by a scheduler tick now and then, and its host work may exceed its device time;
  without a step timed alone, its step timer in the cell) and the device busy per sample;
- from the OTHER cells only (leave-one-out :func:`calibrate.calibrate`): the CPU per sample
  outside the stage timers (the loader's overhead, the training process's share), and the
  tier's fetch bandwidth (cells of the same tier); a tier measured by no other cell falls back
  to the cell's own fetch ceiling (diagnose, measured before the run and apart from it), then
  to a throttled tier's configured cap.

AU on the summary's one basis (device busy / wall): the predicted samples/s times the cell's own
device busy per sample. The consumer takes at most the slower of its nominal demand and what the
trainer's step alone allows.

Error = predicted / measured - 1, for samples/s and AU, with the same against the ends of the
measured figure's interval over repeats where there is one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .calibrate import Calibration, CellFacts, Figure, calibrate, tier_bandwidth, trainer_ms_of
from .model import loader_rate


@dataclass(frozen=True)
class CellCheck:
    cell: str
    run: str
    tier: str
    workers: int
    measured_samples_per_s: float
    measured_au: float  # the summary's AU: device busy / wall
    measured_verdict: str
    predicted_samples_per_s: float | None = None
    error: float | None = None  # predicted / measured - 1
    predicted_au: float | None = None  # predicted samples/s x the cell's device busy per sample
    au_error: float | None = None  # predicted / measured - 1
    predicted_binding: str | None = None
    inputs: dict[str, str] = field(default_factory=dict)  # each model input and where it came from
    note: str = ""
    # the errors against the ends of the measured figure's 95 % interval over repeats (None: one repeat)
    error_interval: tuple[float, float] | None = None
    au_error_interval: tuple[float, float] | None = None


def relative_error(
    predicted: float, measured: float, interval: tuple[float, float] | None
) -> tuple[float | None, tuple[float, float] | None]:
    """predicted / measured - 1, and the same against the ends of the measured interval (the
    upper end first: a larger measurement gives the lower error)."""
    if not measured:
        return None, None
    error = predicted / measured - 1.0
    if interval is None or min(interval) <= 0:
        return error, None
    low, high = interval
    return error, (predicted / high - 1.0, predicted / low - 1.0)


def _fetch_figure(cell: CellFacts, others: list[CellFacts]) -> Figure | None:
    same_tier = [c for c in others if c.tier == cell.tier]
    figure = tier_bandwidth(same_tier) if same_tier else None
    if figure is not None:
        return figure
    if cell.fetch_ceiling_bytes_per_s:
        return Figure(
            cell.fetch_ceiling_bytes_per_s, "this cell's own fetch ceiling (diagnose)", origin="measured"
        )
    if cell.throttle_bytes_per_s:
        return Figure(cell.throttle_bytes_per_s, "the throttled tier's configured bandwidth", origin="given")
    return None


def check_cell(cell: CellFacts, cells: list[CellFacts]) -> CellCheck:
    """``cell`` predicted from ``cells`` without itself."""
    others = [c for c in cells if c.cell_id != cell.cell_id or c.run != cell.run]
    cal = calibrate(others, loader=cell.loader, batch=cell.batch_size)
    measured = CellCheck(
        cell=cell.cell_id,
        run=cell.run,
        tier=cell.tier,
        workers=cell.workers,
        measured_samples_per_s=cell.samples_per_s,
        measured_au=cell.au,
        measured_verdict=cell.verdict,
    )
    if not cell.consumer_rate:
        return replace(measured, note="no consumer rate known: not predicted")
    overhead_ms = cal.overhead_ms.value if cal.overhead_ms else 0.0
    main_ms, main_said = _training_process_share(cell, cal)
    inputs = _described_inputs(cell, cal, overhead_ms, f"{main_ms:.3f} ms per sample, {main_said}")
    inputs["fetch"], fetch_rate = _fetch_input(cell, others)
    p = loader_rate(
        workers=cell.workers,
        cores=cell.cores_usable,
        cpu_s_per_sample=(sum(cell.cpu_ms.values()) + overhead_ms) / 1000.0,
        main_s_per_sample=main_ms / 1000.0,
        fetch_rate=fetch_rate,
        demand=cell.consumer_rate,
    )
    error, error_interval = relative_error(p.samples_per_s, cell.samples_per_s, cell.rate_interval)
    au = cell.au_at(p.samples_per_s)
    au_error, au_interval = relative_error(au, cell.au, cell.au_interval) if au is not None else (None, None)
    return replace(
        measured,
        predicted_samples_per_s=p.samples_per_s,
        error=error,
        predicted_au=au,
        au_error=au_error,
        predicted_binding=p.binding,
        inputs=inputs,
        error_interval=error_interval,
        au_error_interval=au_interval,
    )


def _training_process_share(cell: CellFacts, cal: Calibration) -> tuple[float, str]:
    """The trainer's own CPU per sample (ms) and where it comes from: this cell's measurement, else
    the run's."""
    own = trainer_ms_of(cell)
    if own is not None:
        return own, f"measured: the trainer's own CPU per sample in {cell.cell_id}"
    if cal.trainer_ms:
        return cal.trainer_ms.value, cal.trainer_ms.source
    return 0.0, "no trainer CPU measured: 0"


def _described_inputs(cell: CellFacts, cal: Calibration, overhead_ms: float, training: str) -> dict[str, str]:
    """Each input of the prediction as the report says it: its value and where it comes from."""
    alone = cell.trainer_alone_rate
    return {
        "cpu per sample": f"{sum(cell.cpu_ms.values()):.3f} ms, this cell's stage timers (thread CPU)",
        "loader overhead": f"{overhead_ms:.3f} ms per sample, "
        + (cal.overhead_ms.source if cal.overhead_ms else "no other CPU-bound cell with workers < cores: 0"),
        "training process": training,
        "cores": f"{cell.cores_usable}, the host's usable CPUs",
        "consumer": f"{cell.consumer_rate:,.0f} samples/s, the slower of "
        + (f"the demand ({cell.demand:,.0f}/s)" if cell.demand else "no demand")
        + " and the trainer's own step "
        + (
            f"({alone:,.0f}/s, {'timed alone' if cell.alone_s_per_sample else 'its step timer in the cell'})"
            if alone
            else "(not timed)"
        ),
        "AU": "predicted samples/s x "
        + (
            f"{1e3 * cell.device_s_per_sample:.4f} ms of device busy per sample (this cell's), as the summary's AU"
            if cell.device_s_per_sample
            else "1 / the demand (no device time in the summary)"
        ),
    }


def _fetch_input(cell: CellFacts, others: list[CellFacts]) -> tuple[str, float]:
    """The fetch input as said, and the fetch rate in samples/s it sets (inf where it does not limit)."""
    fetch = _fetch_figure(cell, others)
    if fetch is not None and fetch.lower_bound:
        return f"at least {fetch.value / 1e6:,.1f} MB/s ({fetch.source}): not limiting", math.inf
    if fetch is not None and cell.sample_bytes:
        rate = fetch.value / cell.sample_bytes
        return f"{fetch.value / 1e6:,.1f} MB/s = {rate:,.0f} samples/s, {fetch.source}", rate
    return "not measured by any other cell: not limiting", math.inf


def check_cells(cells: list[CellFacts]) -> list[CellCheck]:
    """Every cell of ``cells`` checked against the others."""
    return [check_cell(c, cells) for c in cells]
