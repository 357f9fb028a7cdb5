"""A measured cell's files: its typed summary and manifest, and its step, telemetry and key tables.

One-process cells (entry/process.py) and multi-rank cells (entry/rank.py, on rank 0, with the job's
figures) both build them through ``cell_files``, from the cell's inputs, its repeats and their
figures (analysis/cellfigures.py, ``analyse_cell``), and write them with ``CellFiles.publish``.
Nothing here computes a figure: it arranges the records.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import torch

from iobench import __version__
from iobench.analysis.cellfigures import CellFigures
from iobench.cell.inputs import CellInputs
from iobench.cell.records import Measurement
from iobench.cell.steps.loaderfactory import decoder_of
from iobench.cell.telemetry import Telemetry
from iobench.results.figures import Attribution, Ceilings, Distributed, RankFigures, loader_stats
from iobench.results.schema import KEYS_SCHEMA, STEP_SCHEMA, TELEMETRY_SCHEMA, account_columns
from iobench.results.store import (
    KEYS_NAME,
    MANIFEST_NAME,
    STEPS_NAME,
    SUMMARY_NAME,
    TELEMETRY_NAME,
    publish_cell,
)
from iobench.results.summary import CellManifest, CellSummary, DatasetInfo, HostInfo, Warmup, utc_now
from loaders.observe import STAGES


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


def _steps_table(cell_id: str, chosen: Measurement) -> pa.Table:
    """Each step's row and its account (the ledger: ``account_*`` columns)."""
    return pa.Table.from_pylist(
        [
            {"cell_id": cell_id, **r.__dict__, **account_columns(e)}
            for r, e in zip(chosen.log.rows, chosen.analysis.entries, strict=True)
        ],
        schema=STEP_SCHEMA,
    )


def _telemetry_table(cell_id: str, telemetry: Telemetry) -> pa.Table:
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
    """A multi-rank cell's job-level figures (entry/rank.py), built into its summary with the rest."""

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


def _manifest(inputs: CellInputs, chosen: Measurement, tier_description: dict) -> CellManifest:
    assert chosen.cache_state is not None
    manifest = inputs.manifest
    return CellManifest(
        host=HostInfo.here(cuda=torch.cuda.is_available()),
        versions=versions(),
        cell=inputs.cell,
        tier=tier_description,
        cache_state=chosen.cache_state,
        dataset=DatasetInfo(
            location=inputs.tier.dataset_dir_or_url(),
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
    inputs: CellInputs,
    runs: Sequence[Measurement],
    figures: CellFigures,
    *,
    warmup: str,
    started: str,
    ceilings: Ceilings | None = None,
    attribution: Attribution | None = None,
    job: JobFigures | None = None,
) -> CellFiles:
    """A measured cell's files: ``figures`` are its repeats' (``analyse_cell(runs, ...)``), whose
    chosen repeat gives the rest; ``warmup`` says how its warm-up was found; ``job``: a multi-rank
    cell's job-level figures."""
    cell, chosen = inputs.cell, runs[figures.chosen]
    log, analysis = chosen.log, chosen.analysis
    assert chosen.cache_state is not None
    tier_description = inputs.tier.describe()
    tier_device = ((tier_description.get("storage") or {}).get("device") or {}).get("name")
    seen = chosen.telemetry.window(log.measure_start or 0.0, log.measure_end or 0.0, tier_device)
    if job is not None and not job.one_host:  # one host's reads say nothing of a multi-node job's
        seen = replace(
            seen,
            device_read_bytes_per_s=None,
            read_call_bytes_per_s=None,
            cell_device_read_bytes=None,
            host_device_read_bytes_per_s=None,
        )
    summary = CellSummary(
        status="ok",
        cell=cell,
        metrics=analysis.metrics,
        verdict=analysis.verdict,  # samples lost said first in it (analysis/verdict.py)
        stage_ms_per_sample=log.measured_stats.per_sample_ms("wall"),
        stage_cpu_ms_per_sample=log.measured_stats.per_sample_ms("cpu"),
        loader_stats=loader_stats(log.measured_stats),
        loader_stats_all_steps=loader_stats(log.all_stats),
        cache_state=chosen.cache_state,
        epochs_completed=log.epochs_completed,
        epochs=tuple(analysis.epochs),
        losses=analysis.loss,
        warmup=Warmup(steps=figures.warmup_steps, method=warmup),
        window=analysis.window,
        mlperf=figures.mlperf,
        repeats=figures.repeats,
        stability=figures.stability,
        ceilings=ceilings,
        attribution=attribution,
        warnings=figures.warnings,
        decoder=decoder_of(cell.loader),
        split=analysis.split,
        epoch_delta=figures.epoch_delta,
        epoch1_vs_steady=figures.epoch1_vs_steady,
        device_read_bytes=seen.device_read_bytes,
        tier_device=tier_device,
        client=inputs.tier.object_client(),
        device_read_bytes_per_s=seen.device_read_bytes_per_s,
        read_call_bytes_per_s=seen.read_call_bytes_per_s,
        cell_device_read_bytes=seen.cell_device_read_bytes,
        host_device_read_bytes_per_s=seen.host_device_read_bytes_per_s,
        cpu_percent_per_core=seen.cpu_percent_per_core,
        gpu_utilization_pct=seen.gpu_utilization_pct,
        consumer=inputs.consumer.describe(),
        step_times=figures.step_times,
        distributed=job.distributed if job else None,
        ranks=job.ranks if job else (),
        scale=figures.scale,
        scale_method=figures.scale_method,
        scale_queue_depth=figures.scale_queue_depth,
        started_at=started,
        finished_at=utc_now(),
        checkpoint=chosen.checkpoint,
    )
    return CellFiles(
        summary=summary,
        manifest=_manifest(inputs, chosen, tier_description),
        steps=_steps_table(cell.cell_id, chosen),
        telemetry=_telemetry_table(cell.cell_id, chosen.telemetry),
        keys=_keys_table(log.keys),
    )


def _keys_table(keys: list[tuple[int, int, int, str]]) -> pa.Table | None:
    """Every delivered sample's (rank, epoch, step, key), where run.record_keys kept them."""
    if not keys:
        return None
    return pa.Table.from_pylist(
        [dict(zip(KEYS_SCHEMA.names, k, strict=True)) for k in keys], schema=KEYS_SCHEMA
    )
