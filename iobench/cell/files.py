"""A measured cell's files: its typed summary and manifest, and its step, telemetry and key tables.

One-process cells (process.py) and multi-rank cells (rank.py, on rank 0, with the job's figures)
both build them through ``cell_files`` and write them with ``CellFiles.publish``.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import torch

from iobench import __version__
from iobench.accelerators.demand import mlperf_au_threshold
from iobench.analysis import scale
from iobench.analysis.honesty import cache_warnings, epoch1_vs_steady, epoch_delta
from iobench.analysis.mlperf import mlperf_figures, reading_of
from iobench.analysis.queue import LoaderQueue
from iobench.analysis.repeats import summarize
from iobench.analysis.steptimes import step_times
from iobench.cell.measure import Measurement
from iobench.cell.ranks.allreduce import allreduce_model, gradient_size_known
from iobench.cell.steps.loaderfactory import decoder_notes, decoder_of
from iobench.results.codec import from_json
from iobench.results.figures import Attribution, Ceiling, Distributed, LoaderStats, RankFigures
from iobench.results.schema import KEYS_SCHEMA, STEP_SCHEMA, TELEMETRY_SCHEMA, account_columns
from iobench.results.spec import CellSpec
from iobench.results.store import (
    KEYS_NAME,
    MANIFEST_NAME,
    STEPS_NAME,
    SUMMARY_NAME,
    TELEMETRY_NAME,
    publish_cell,
)
from iobench.results.summary import (
    CellManifest,
    CellSummary,
    DatasetInfo,
    HostInfo,
    RepeatFigures,
    Stability,
    Warmup,
    utc_now,
)
from loaders.observe import STAGES

# the summary's figures of what one host read: a multi-node cell has none (rank.py)
HOST_READS = (
    "device_read_bytes_per_s",
    "read_call_bytes_per_s",
    "cell_device_read_bytes",
    "host_device_read_bytes_per_s",
)


def versions() -> dict[str, str]:
    import cv2
    import numpy
    import simplejpeg

    return {
        "iobench": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "simplejpeg": simplejpeg.__version__,
        "opencv": cv2.__version__,
    }


def _at_scale(cell: CellSpec, consumer, rows, alone) -> tuple[list, int]:
    """The synchronous job predicted at scale, and the loader queue depth the model replayed."""
    model = allreduce_model(cell.run, cell.accelerator, consumer)
    queue = scale.replayed(
        [r for r in rows if not r.warmup], LoaderQueue(cell.loader.workers, cell.loader.prefetch)
    )
    points = scale.predict(
        rows, model.exposed if model else lambda world, compute: 0.0, queue=queue, alone=alone
    )
    return points, queue.depth


def host_work_warnings(consumer) -> list[str]:
    """An emulated trainer whose host work is the documented default, not this host's calibration."""
    cost = getattr(consumer, "host", None)
    if cost is None or cost.kind != "default":
        return []
    return [
        f"host work of {cost.model}: not calibrated on this host, so the documented default of "
        f"configs/accelerators.yaml ({1000 * cost.cpu_s_per_step:.1f} CPU-ms per step on {cost.threads} thread(s) "
        f"at batch {cost.batch_size}); "
        f"`iobench calibrate --model {cost.model}` measures it here"
    ]


def allreduce_warnings(cell: CellSpec, consumer) -> list[str]:
    """A fabric named but no gradient size to move over it: the prediction at scale leaves it out."""
    if cell.run.interconnect is None or gradient_size_known(cell.accelerator, consumer):
        return []
    return [
        f"all-reduce not modelled: configs/accelerators.yaml has no parameter count for {cell.accelerator.model}, "
        "so the synchronous AU predicted at scale has no all-reduce in it (MLPerf Storage's computation_time "
        "is its whole step)"
    ]


def loader_stats(stats) -> LoaderStats:
    """The loader's StageStats as the summary records them."""
    return from_json(LoaderStats, stats.as_dict())


def _steps_table(cell_id: str, chosen: Measurement) -> pa.Table:
    """Each step's row and its account (the ledger: ``account_*`` columns)."""
    return pa.Table.from_pylist(
        [
            {"cell_id": cell_id, **r.__dict__, **account_columns(e)}
            for r, e in zip(chosen.log.rows, chosen.analysis.entries, strict=True)
        ],
        schema=STEP_SCHEMA,
    )


def _telemetry_table(cell_id: str, telemetry) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "cell_id": cell_id,
                "t": s.t,
                "cpu_percent": s.cpu_percent,
                "mem_used_bytes": s.mem_used_bytes,
                "mem_available_bytes": s.mem_available_bytes,
                "disk_read_bytes": json.dumps(s.disk_read_bytes),
                "process_read_bytes": s.process_read_bytes,
                "process_read_chars": s.process_read_chars,
                "gpu_utilization_pct": [g.utilization_pct for g in s.gpus],
                "gpu_memory_used_bytes": [g.memory_used_bytes for g in s.gpus],
                "gpu_pcie_tx_bytes_per_s": [g.pcie_tx_bytes_per_s for g in s.gpus],
                "gpu_pcie_rx_bytes_per_s": [g.pcie_rx_bytes_per_s for g in s.gpus],
            }
            for s in telemetry.samples
        ],
        schema=TELEMETRY_SCHEMA,
    )


@dataclass(frozen=True)
class JobFigures:
    """A multi-rank cell's job-level figures (rank.py), built into its summary with the rest."""

    distributed: Distributed
    ranks: tuple[RankFigures, ...]
    one_host: bool  # every rank on this host: its reads are the job's


@dataclass(frozen=True)
class CellFiles:
    """A measured cell's files, each a typed record or table; ``publish`` writes them whole."""

    summary: CellSummary
    manifest: CellManifest
    steps: pa.Table
    telemetry: pa.Table
    keys: pa.Table | None = None

    def publish(self, run_dir: Path) -> Path:
        files: dict[str, object] = {
            SUMMARY_NAME: self.summary,
            MANIFEST_NAME: self.manifest,
            STEPS_NAME: self.steps,
            TELEMETRY_NAME: self.telemetry,
        }
        if self.keys is not None:
            files[KEYS_NAME] = self.keys
        return publish_cell(run_dir, self.summary.cell_id, files)


def _reads(chosen: Measurement, tier_device: str | None) -> dict[str, object]:
    """What the cell's processes (and the host, for the tier's device) read, over the measured window
    and the whole run (docs/method.md, Bytes read)."""
    log, telemetry = chosen.log, chosen.telemetry
    start, end = log.measure_start or 0.0, log.measure_end or 0.0
    return dict(
        device_read_bytes=telemetry.disk_read_bytes(start, end),
        device_read_bytes_per_s=telemetry.rate(start, end, lambda t: t.process_read_bytes),
        read_call_bytes_per_s=telemetry.rate(start, end, lambda t: t.process_read_chars),
        cell_device_read_bytes=telemetry.growth(lambda t: t.process_read_bytes),
        host_device_read_bytes_per_s=telemetry.rate(
            start, end, lambda t: t.disk_read_bytes.get(tier_device, 0)
        )
        if tier_device
        else None,
        cpu_percent_per_core=tuple(telemetry.mean_cpu_percent(start, end)),
        gpu_utilization_pct=telemetry.mean_gpu_utilization(start, end),
    )


def _repeats(runs: list[Measurement]) -> dict[str, object]:
    """Each repeat's figures and their spread."""
    return dict(
        repeats=tuple(
            RepeatFigures(
                samples_per_s=m.metrics.samples_per_s,
                au=m.metrics.au,
                cache=m.cache_state.achieved if m.cache_state else None,
            )
            for m in runs
        ),
        stability=Stability(
            samples_per_s=summarize([m.metrics.samples_per_s for m in runs]),
            au=summarize([m.metrics.au for m in runs]),
        ),
    )


def _manifest(cell: CellSpec, tier, manifest, chosen: Measurement, tier_description: dict) -> CellManifest:
    assert chosen.cache_state is not None
    return CellManifest(
        host=HostInfo.here(cuda=torch.cuda.is_available()),
        versions=versions(),
        cell=cell,
        tier=tier_description,
        cache_state=chosen.cache_state,
        dataset=DatasetInfo(
            location=tier.dataset_dir_or_url(),
            format=manifest.format,
            num_samples=manifest.num_samples,
            total_bytes=manifest.total_bytes,
            shards=len(manifest.shards),
            mean_sample_bytes=manifest.mean_sample_bytes,
            source=manifest.source,
        ),
        stage_names=tuple(STAGES),
    )


def cell_files(
    cell: CellSpec,
    tier,
    manifest,
    consumer,
    runs: list[Measurement],
    chosen: Measurement,
    *,
    warmup: str,
    started: str,
    ceilings: dict[str, Ceiling] | None = None,
    attribution: Attribution | None = None,
    job: JobFigures | None = None,
) -> CellFiles:
    """A measured cell's files. ``chosen`` is the repeat the figures come from; its steps also give
    the synchronous AU predicted at scale. ``job``: a multi-rank cell's job-level figures."""
    log, metrics, analysis = chosen.log, chosen.metrics, chosen.analysis
    assert chosen.cache_state is not None
    epochs = analysis.epochs
    tier_description = tier.describe()
    tier_device = ((tier_description.get("storage") or {}).get("device") or {}).get("name")
    states = [m.cache_state for m in runs if m.cache_state is not None]
    points, depth = _at_scale(cell, consumer, log.rows, chosen.alone)
    reads = _reads(chosen, tier_device)
    if job is not None and not job.one_host:  # one host's reads say nothing of a multi-node job's
        reads.update(dict.fromkeys(HOST_READS))
    losses, all_steps = analysis.loss, loader_stats(log.all_stats)
    summary = CellSummary(
        status="ok",
        cell=cell,
        metrics=metrics,
        verdict=chosen.verdict,  # samples lost said first in it (analysis/verdict.py)
        stage_ms_per_sample=log.measured_stats.per_sample_ms("wall"),
        stage_cpu_ms_per_sample=log.measured_stats.per_sample_ms("cpu"),
        loader_stats=loader_stats(log.measured_stats),
        loader_stats_all_steps=all_steps,
        cache_state=chosen.cache_state,
        epochs_completed=log.epochs_completed,
        epochs=tuple(epochs),
        losses=losses,
        warmup=Warmup(steps=sum(r.warmup for r in log.rows), method=warmup),
        window=chosen.window,
        mlperf=mlperf_figures(
            epochs,
            metrics,
            cell.accelerator.count * cell.run.world_size,
            mlperf_au_threshold(cell.accelerator.model),
            reading_of(cell),
        ),
        **_repeats(runs),
        ceilings=ceilings,
        attribution=attribution,
        warnings=(
            *cache_warnings(cell.cache, states, epochs, tier, manifest),
            *host_work_warnings(consumer),
            *allreduce_warnings(cell, consumer),
            *decoder_notes(cell.loader),
        ),
        decoder=decoder_of(cell.loader),
        split=analysis.split,
        epoch_delta=epoch_delta(epochs),
        epoch1_vs_steady=epoch1_vs_steady(epochs, metrics.samples_per_s),
        tier_device=tier_device,
        client=tier.object_client(),
        **reads,  # type: ignore[arg-type]
        consumer=consumer.describe(),
        step_times=step_times(log.rows, metrics.au_basis or ""),
        distributed=job.distributed if job else None,
        ranks=job.ranks if job else (),
        scale=tuple(points),
        scale_method=scale.METHOD,
        scale_queue_depth=depth,
        started_at=started,
        finished_at=utc_now(),
        checkpoint=chosen.checkpoint,
    )
    return CellFiles(
        summary=summary,
        manifest=_manifest(cell, tier, manifest, chosen, tier_description),
        steps=_steps_table(cell.cell_id, chosen),
        telemetry=_telemetry_table(cell.cell_id, chosen.telemetry),
        keys=_keys_table(log.keys),
    )


def _keys_table(keys: list) -> pa.Table | None:
    """Every delivered sample's (rank, epoch, step, key), where run.record_keys kept them."""
    if not keys:
        return None
    return pa.Table.from_pylist(
        [dict(zip(KEYS_SCHEMA.names, k, strict=True)) for k in keys], schema=KEYS_SCHEMA
    )
