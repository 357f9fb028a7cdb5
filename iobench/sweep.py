"""Plan a sweep into cells and run each cell in a fresh process, publishing results as they land."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .config import Cell, SweepConfig
from .results.store import publish_cell, write_results_table
from .run.cell import failed_summary


def ensure_dataset(config: SweepConfig, progress: Callable[[int, int], None] | None = None) -> None:
    """Generate the configured synthetic dataset once (reused when complete), and its
    one-object-per-sample layout when a loader reads that layout."""
    if config.dataset.synth is not None:
        from .datasets.synth import ensure_dataset as ensure

        ensure(config.dataset.path, progress=progress, **config.dataset.synth)
    if "objects" in config.layouts():
        from .datasets.objects import explode

        explode(config.dataset.path)


def stage_tiers(config: SweepConfig) -> list[str]:
    """Upload the dataset to every tier marked ``stage: true`` (idempotent, verified)."""
    from .tiers import make_tier

    return [make_tier(t).stage_dataset(str(config.dataset.path)) for t in config.tiers if t.get("stage")]


def run_cell_process(cell: Cell, run_dir: Path, timeout_s: int) -> dict:
    """Run one cell in a child interpreter; a crash or time-out becomes a failed cell, not a lost one."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cell.as_dict(), f)
        spec = f.name
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "iobench.run.cell", spec, str(run_dir)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        error = None
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            error = tail[0]
    except subprocess.TimeoutExpired:
        error = f"cell did not finish within run.timeout_s={timeout_s} s"
    finally:
        os.unlink(spec)
    summary_path = run_dir / cell.cell_id / "summary.json"
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        if error is None or summary.get("status") == "failed":
            return summary
    summary = failed_summary(cell.as_dict(), error or "cell wrote no summary")
    publish_cell(run_dir, cell.cell_id, {"summary.json": summary})
    return summary


def run_sweep(
    config: SweepConfig,
    run_dir: Path,
    *,
    on_cell_start: Callable[[int, int, Cell], None] | None = None,
    on_cell_done: Callable[[int, int, Cell, dict, float], None] | None = None,
) -> list[dict]:
    run_dir.mkdir(parents=True, exist_ok=True)
    cells = config.cells()
    summaries = []
    for i, cell in enumerate(cells):
        if on_cell_start:
            on_cell_start(i, len(cells), cell)
        t0 = time.perf_counter()
        summary = run_cell_process(cell, run_dir, config.run.timeout_s)
        write_results_table(run_dir, order=[c.cell_id for c in cells])
        summaries.append(summary)
        if on_cell_done:
            on_cell_done(i, len(cells), cell, summary, time.perf_counter() - t0)
    return summaries
