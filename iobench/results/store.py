"""Writing and reading run directories. Every file appears atomically; a cell's directory
appears in one rename, so a reader (or a resumed sweep) sees a cell complete or not at all.

    RUN_DIR/results.parquet              one row per cell (results/schema.py)
    RUN_DIR/<cell_id>/summary.json       metrics, verdict, stage times, schema_version
    RUN_DIR/<cell_id>/manifest.json      host, versions, config, tier description, cache state
    RUN_DIR/<cell_id>/steps.parquet      one row per step (of every rank, in a multi-rank cell)
    RUN_DIR/<cell_id>/telemetry.parquet  host samples (CPU per core, disk reads, memory)
    RUN_DIR/<cell_id>/keys.parquet       with run.record_keys: every delivered sample's key
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from iobench.host.atomic import atomic_write, atomic_write_json

from .codec import RecordError, from_json, to_json
from .schema import RESULT_SCHEMA, summary_to_row
from .summary import CellManifest, CellSummary

RESULTS_NAME = "results.parquet"
SUMMARY_NAME = "summary.json"
MANIFEST_NAME = "manifest.json"
STEPS_NAME = "steps.parquet"
TELEMETRY_NAME = "telemetry.parquet"
KEYS_NAME = "keys.parquet"  # with run.record_keys


def publish_cell(run_dir: Path, cell_id: str, files: dict[str, object]) -> Path:
    """Write a cell's files into a hidden staging directory, then rename it into place.

    ``files`` maps a file name to a typed record or a dict (written as JSON) or a pyarrow Table
    (written as Parquet).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{cell_id}.", suffix=".partial", dir=run_dir))
    try:
        for name, content in files.items():
            if isinstance(content, pa.Table):
                pq.write_table(content, staging / name)
            else:
                atomic_write_json(
                    staging / name, to_json(content) if dataclasses.is_dataclass(content) else content
                )
        os.chmod(staging, 0o755)
        final = run_dir / cell_id
        if final.exists():  # a re-run replaces the old result; the old one goes only once the new is whole
            old = run_dir / f".{cell_id}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, final)
        return final
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def read_summary(run_dir: Path, cell_id: str) -> CellSummary | None:
    """A cell's summary; None when it has none, or one that is unreadable (a torn or foreign file)."""
    try:
        return from_json(CellSummary, json.loads((Path(run_dir) / cell_id / SUMMARY_NAME).read_text()))
    except (OSError, ValueError):  # RecordError is a ValueError
        return None


def read_manifest(run_dir: Path, cell_id: str) -> CellManifest | None:
    """A measured cell's manifest (failed cells have none)."""
    try:
        return from_json(CellManifest, json.loads((Path(run_dir) / cell_id / MANIFEST_NAME).read_text()))
    except (OSError, ValueError):  # RecordError is a ValueError
        return None


def cell_summaries(run_dir: Path) -> list[CellSummary]:
    """Every cell's summary in the run directory, by cell id; raises RecordError on one that does
    not fit the record (naming the file), so a damaged result is never silently left out."""
    out = []
    for path in sorted(Path(run_dir).glob(f"*/{SUMMARY_NAME}")):
        if path.parent.name.startswith("."):
            continue
        with open(path) as f:
            try:
                out.append(from_json(CellSummary, json.load(f)))
            except ValueError as exc:  # RecordError is one
                raise RecordError(f"{path}: not a cell summary iobench can read ({exc})") from None
    return out


def write_results_table(run_dir: Path, order: list[str] | None = None) -> Path:
    """Rebuild results.parquet from the cells' summaries (the summaries are the source of truth)."""
    summaries = cell_summaries(run_dir)
    if order:
        rank = {cid: i for i, cid in enumerate(order)}
        summaries.sort(key=lambda s: rank.get(s.cell_id, len(rank)))
    rows = [summary_to_row(s) for s in summaries]
    table = pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)
    dest = Path(run_dir) / RESULTS_NAME
    with atomic_write(dest, "wb") as f:
        pq.write_table(table, f)
    return dest


def load_results(run_dir: str | Path) -> pa.Table:
    """The run's results table (pandas: ``load_results(d).to_pandas()``)."""
    path = Path(run_dir) / RESULTS_NAME
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} an iobench run directory?")
    return pq.read_table(path)
