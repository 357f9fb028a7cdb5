"""One cell, in a process of its own: prepare the tier, run the step loop, write the results.

    python -m iobench.run.cell CELL.json RUN_DIR

A fresh process per cell keeps one cell's workers, page-cache warmth in the interpreter, imported
decoders and torch thread pools from leaking into the next cell's numbers.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
import sys
import time
import traceback
from pathlib import Path

import pyarrow as pa
import torch

from loaders.instrument import STAGES

from .. import __version__
from ..analysis.metrics import compute_metrics
from ..analysis.verdict import attribute
from ..demand import lookup_demand
from ..results.schema import SCHEMA_VERSION, STEP_SCHEMA
from ..results.store import publish_cell
from ..tiers import make_tier
from .accelerator import EmulatedAccelerator, TorchTrainStep
from .loaderfactory import build_loader
from .steploop import StepRow, epoch_rows, run_steps
from .telemetry import TelemetrySampler


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _versions() -> dict:
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


def _host() -> dict:
    import psutil

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": platform.processor() or _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "cuda": torch.cuda.is_available(),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def make_consumer(acc: dict):
    if acc["kind"] == "emulated":
        return EmulatedAccelerator(lookup_demand(acc["type"], acc["model"], acc["demand"]), acc["count"])
    return TorchTrainStep(acc["model"])


def _steps_table(rows: list[StepRow]) -> pa.Table:
    return pa.Table.from_pylist([r.__dict__ for r in rows], schema=STEP_SCHEMA)


def _telemetry_table(telemetry) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "t": s.t,
                "cpu_percent": s.cpu_percent,
                "mem_used_bytes": s.mem_used_bytes,
                "mem_available_bytes": s.mem_available_bytes,
                "disk_read_bytes": json.dumps(s.disk_read_bytes),
            }
            for s in telemetry.samples
        ]
    )


def loader_inputs(tier, manifest, loader: dict) -> tuple[list, dict]:
    """What the loader reads: shard URLs, or (key, url, label) per sample for the objects layout."""
    source = tier.source_options(manifest)
    if loader.get("layout", "shards") == "shards":
        return tier.shard_urls(manifest), source
    from ..datasets.objects import INDEX_NAME, OBJECTS_DIR, load_index

    samples = load_index(tier.read_json(INDEX_NAME), tier.object_url(INDEX_NAME))
    items = [(s["key"], tier.object_url(f"{OBJECTS_DIR}/{s['name']}"), s["label"]) for s in samples]
    # sizes from the index save a HEAD per object; per-sample objects bypass the shard cache
    source.update(
        shard_sizes={url: s["bytes"] for (_, url, _), s in zip(items, samples, strict=True)}, cache_dir=None
    )
    return items, source


def run_cell(cell: dict, run_dir: Path) -> dict:
    """Measure one cell and publish its directory; returns the summary."""
    started = _now()
    tier = make_tier(cell["tier"])
    manifest = tier.load_manifest()
    cache_state = tier.prepare(manifest, cell["cache"])
    items, source_options = loader_inputs(tier, manifest, cell["loader"])
    consumer = make_consumer(cell["accelerator"])
    run = cell["run"]
    loader = cell["loader"]
    cores = _host()["usable_cpus"]

    with TelemetrySampler() as telemetry:
        created_at = time.perf_counter()
        make_epoch = build_loader(items, source_options, loader, run)
        log = run_steps(
            make_epoch,
            consumer,
            created_at=created_at,
            epochs=run["epochs"],
            warmup_steps=run["warmup_steps"],
            max_steps=run["max_steps"],
        )
    metrics = compute_metrics(log.rows, log.time_to_first_batch_s)
    verdict = attribute(
        metrics,
        log.measured_stats,
        workers=loader["workers"],
        cores=cores,
        demand_samples_per_s=consumer.demand_samples_per_s,
    )
    device_bytes = telemetry.disk_read_bytes(log.measure_start or 0.0, log.measure_end or 0.0)
    tier_description = tier.describe()
    tier_device = ((tier_description.get("storage") or {}).get("device") or {}).get("name")
    tier_bytes = device_bytes.get(tier_device) if tier_device else None
    summary = {
        "schema_version": SCHEMA_VERSION,
        "status": "ok",
        "cell": cell,
        "metrics": metrics.as_dict(),
        "verdict": verdict.as_dict(),
        "stage_ms_per_sample": log.measured_stats.per_sample_ms("wall"),
        "stage_cpu_ms_per_sample": log.measured_stats.per_sample_ms("cpu"),
        "loader_stats": log.measured_stats.as_dict(),
        "loader_stats_all_steps": log.all_stats.as_dict(),
        "cache_state": cache_state.to_dict(),
        "epochs_completed": log.epochs_completed,
        "epochs": epoch_rows(log),
        "device_read_bytes": device_bytes,
        "tier_device": tier_device,
        "device_read_bytes_per_s": tier_bytes / metrics.wall_s if tier_bytes and metrics.wall_s else None,
        "cpu_percent_per_core": telemetry.mean_cpu_percent(log.measure_start or 0.0, log.measure_end or 0.0),
        "consumer": consumer.describe(),
        "started_at": started,
        "finished_at": _now(),
    }
    manifest_doc = {
        "schema_version": SCHEMA_VERSION,
        "host": _host(),
        "versions": _versions(),
        "cell": cell,
        "tier": tier_description,
        "cache_state": cache_state.to_dict(),
        "dataset": {
            "location": tier.dataset_dir_or_url(),
            "format": manifest.format,
            "num_samples": manifest.num_samples,
            "total_bytes": manifest.total_bytes,
            "shards": len(manifest.shards),
            "mean_sample_bytes": manifest.mean_sample_bytes,
            "source": manifest.source,
        },
        "stage_names": list(STAGES),
    }
    publish_cell(
        run_dir,
        cell["cell_id"],
        {
            "summary.json": summary,
            "manifest.json": manifest_doc,
            "steps.parquet": _steps_table(log.rows),
            "telemetry.parquet": _telemetry_table(telemetry),
        },
    )
    return summary


def failed_summary(cell: dict, error: str) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "failed",
        "cell": cell,
        "error": error,
        "finished_at": _now(),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m iobench.run.cell CELL.json RUN_DIR", file=sys.stderr)
        return 2
    cell = json.loads(Path(args[0]).read_text())
    run_dir = Path(args[1])
    try:
        run_cell(cell, run_dir)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        message = f"{type(exc).__name__}: {exc}"
        publish_cell(run_dir, cell["cell_id"], {"summary.json": failed_summary(cell, message)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
