"""One measured run of a cell: make the cache state, build the loader, run the steps, analyse.

A cell runs this once per repeat (and the capacity check once per accelerator count), each time
from a freshly prepared cache state, so repeats are independent measurements of the same thing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..analysis.metrics import PipelineMetrics, compute_metrics
from ..analysis.steady import SteadyState, steady_state
from ..analysis.verdict import Verdict, attribute
from ..tiers.base import CacheState
from .live import live_file
from .loaderfactory import build_loader
from .steploop import StepLog, mark_warmup, run_steps, step_durations
from .telemetry import Telemetry, TelemetrySampler


@dataclass
class Measurement:
    log: StepLog
    metrics: PipelineMetrics
    verdict: Verdict
    cache_state: CacheState
    telemetry: Telemetry
    steady: SteadyState | None  # None when the warm-up was a fixed count


def measure(
    tier, manifest, cell: dict, items: list, source_options: dict, consumer, cores: int
) -> Measurement:
    run, loader = cell["run"], cell["loader"]
    cache_state = tier.prepare(manifest, cell["cache"])
    auto = run["warmup_steps"] == "auto"
    live = live_file()
    if live:
        live.start_run()
    with TelemetrySampler() as telemetry:
        created_at = time.perf_counter()
        make_epoch = build_loader(items, source_options, loader, run)
        log = run_steps(
            make_epoch,
            consumer,
            created_at=created_at,
            epochs=run["epochs"],
            warmup_steps=0 if auto else run["warmup_steps"],
            max_steps=run["max_steps"],
            on_step=live.on_step if live else None,
        )
    steady = None
    if auto and log.rows:
        steady = steady_state(step_durations(log))
        mark_warmup(log, steady.warmup_steps)
    metrics = compute_metrics(log.rows, log.time_to_first_batch_s)
    verdict = attribute(
        metrics,
        log.measured_stats,
        workers=loader["workers"],
        cores=cores,
        demand_samples_per_s=consumer.demand_samples_per_s,
    )
    return Measurement(log, metrics, verdict, cache_state, telemetry, steady)
