"""One cell, in a process of its own: prepare the tier, run the step loop, write the results.

    python -m iobench.cell.process CELL.json RUN_DIR

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
import traceback
from pathlib import Path

import pyarrow as pa
import torch

from iobench import __version__
from iobench.analysis.differential import combine
from iobench.analysis.honesty import cache_warnings, epoch1_vs_steady, epoch_delta
from iobench.analysis.repeats import summarize
from iobench.cell.accelerator import EmulatedAccelerator, TorchTrainStep
from iobench.cell.diagnose import check_capacity, measure_ceilings
from iobench.cell.lifeline import die_with_parent
from iobench.cell.measure import Measurement, measure
from iobench.cell.steploop import StepRow, epoch_rows
from iobench.host.cores import usable_cores
from iobench.results.schema import KEYS_SCHEMA, SCHEMA_VERSION, STEP_SCHEMA
from iobench.results.store import publish_cell
from iobench.sweep.demand import Demand, lookup_demand
from iobench.tiers import make_tier
from loaders.instrument import STAGES


def utc_now() -> str:
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
        "usable_cpus": usable_cores(),
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


def make_consumer(acc: dict, device: str | None = None):
    """The cell's accelerator; ``device`` places a torch model (a rank's own GPU)."""
    if acc["kind"] == "torch":
        return TorchTrainStep(acc["model"], device=device)
    if acc.get("samples_per_s"):
        demand = Demand(
            "custom", acc["model"], "custom", float(acc["samples_per_s"]), "given in the sweep file"
        )
    else:
        demand = lookup_demand(acc["type"], acc["model"], acc["demand"])
    return EmulatedAccelerator(demand, acc["count"])


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
    from iobench.datasets.objects import INDEX_NAME, OBJECTS_DIR, load_index

    samples = load_index(tier.read_json(INDEX_NAME), tier.object_url(INDEX_NAME))
    items = [(s["key"], tier.object_url(f"{OBJECTS_DIR}/{s['name']}"), s["label"]) for s in samples]
    # sizes from the index save a HEAD per object; per-sample objects bypass the shard cache
    source.update(
        shard_sizes={url: s["bytes"] for (_, url, _), s in zip(items, samples, strict=True)}, cache_dir=None
    )
    return items, source


def median_run(runs: list[Measurement]) -> Measurement:
    """The run whose samples/s is the median (the lower one of an even count): a real run, so all
    of its figures belong together."""
    ordered = sorted(runs, key=lambda m: m.metrics.samples_per_s)
    return ordered[(len(ordered) - 1) // 2]


def warmup_method(m: Measurement, run: dict) -> str:
    return m.steady.method if m.steady else f"fixed: run.warmup_steps={run['warmup_steps']}"


def run_cell(cell: dict, run_dir: Path) -> dict:
    """Measure one cell and publish its directory; returns the summary."""
    started = utc_now()
    tier = make_tier(cell["tier"])
    manifest = tier.load_manifest()
    items, source_options = loader_inputs(tier, manifest, cell["loader"])
    consumer = make_consumer(cell["accelerator"])
    run = cell["run"]
    cores = _host()["usable_cpus"]

    ceilings = (
        measure_ceilings(tier, manifest, cell, items, source_options, consumer)
        if run.get("diagnose")
        else None
    )
    runs = [
        measure(tier, manifest, cell, items, source_options, consumer, cores)
        for _ in range(run.get("repeats", 1))
    ]
    chosen = median_run(runs)
    log, metrics, verdict = chosen.log, chosen.metrics, chosen.verdict
    attribution = None
    if ceilings:
        attribution = combine(
            {k: c.samples_per_s for k, c in ceilings.items()},
            verdict,
            measured_samples_per_s=metrics.samples_per_s,
            au=metrics.au,
            wall_s=metrics.wall_s,
            wait_s=metrics.wait_s,
            h2d_s=metrics.h2d_s,
            stage_ms=log.measured_stats.per_sample_ms("wall"),
        ).as_dict()
        if isinstance(consumer, EmulatedAccelerator):
            input_ceiling = min(ceilings["prep"].samples_per_s, ceilings["fetch"].samples_per_s)
            attribution["capacity"] = check_capacity(
                tier, manifest, cell, items, source_options, consumer, cores, input_ceiling
            )
    files = cell_files(
        cell,
        tier,
        manifest,
        consumer,
        runs,
        chosen,
        warmup=warmup_method(chosen, run),
        started=started,
        ceilings={k: c.as_dict() for k, c in ceilings.items()} if ceilings else None,
        attribution=attribution,
    )
    publish_cell(run_dir, cell["cell_id"], files)
    return files["summary.json"]


def cell_files(
    cell: dict,
    tier,
    manifest,
    consumer,
    runs: list[Measurement],
    chosen: Measurement,
    *,
    warmup: str,
    started: str,
    ceilings: dict | None = None,
    attribution: dict | None = None,
) -> dict[str, object]:
    """A measured cell's files: summary.json, manifest.json, steps.parquet, telemetry.parquet, and
    keys.parquet when run.record_keys kept the keys. ``chosen`` is the run the figures come from."""
    log, metrics, verdict, telemetry = chosen.log, chosen.metrics, chosen.verdict, chosen.telemetry
    assert chosen.cache_state is not None
    epochs = epoch_rows(log)
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
        "cache_state": chosen.cache_state.to_dict(),
        "epochs_completed": log.epochs_completed,
        "epochs": epochs,
        "warmup": {"steps": sum(r.warmup for r in log.rows), "method": warmup},
        "repeats": [
            {
                "samples_per_s": m.metrics.samples_per_s,
                "au": m.metrics.au,
                "cache": m.cache_state.achieved if m.cache_state else None,
            }
            for m in runs
        ],
        "stability": {
            "samples_per_s": summarize([m.metrics.samples_per_s for m in runs]).as_dict(),
            "au": summarize([m.metrics.au for m in runs]).as_dict(),
        },
        "ceilings": ceilings,
        "attribution": attribution,
        "warnings": cache_warnings(cell, [m.cache_state for m in runs], epochs, tier, manifest),
        "epoch_delta": epoch_delta(epochs),
        "epoch1_vs_steady": epoch1_vs_steady(epochs, metrics.samples_per_s),
        "device_read_bytes": device_bytes,
        "tier_device": tier_device,
        "device_read_bytes_per_s": tier_bytes / metrics.wall_s if tier_bytes and metrics.wall_s else None,
        "cpu_percent_per_core": telemetry.mean_cpu_percent(log.measure_start or 0.0, log.measure_end or 0.0),
        "consumer": consumer.describe(),
        "started_at": started,
        "finished_at": utc_now(),
    }
    manifest_doc = {
        "schema_version": SCHEMA_VERSION,
        "host": _host(),
        "versions": _versions(),
        "cell": cell,
        "tier": tier_description,
        "cache_state": chosen.cache_state.to_dict(),
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
    files: dict[str, object] = {
        "summary.json": summary,
        "manifest.json": manifest_doc,
        "steps.parquet": _steps_table(log.rows),
        "telemetry.parquet": _telemetry_table(telemetry),
    }
    if log.keys:
        files["keys.parquet"] = pa.Table.from_pylist(
            [dict(zip(KEYS_SCHEMA.names, k, strict=True)) for k in log.keys], schema=KEYS_SCHEMA
        )
    return files


def failed_summary(cell: dict, error: str) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "failed",
        "cell": cell,
        "error": error,
        "finished_at": utc_now(),
    }


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m iobench.cell.process CELL.json RUN_DIR", file=sys.stderr)
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
