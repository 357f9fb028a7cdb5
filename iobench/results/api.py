"""Reading run directories from Python: the results of one or more runs and their per-step series.

    >>> from iobench.results import load_run, load_runs, load_steps, to_pandas
    >>> load_run("runs/nvme").column("samples_per_s")
    >>> to_pandas(load_runs(["runs/nvme", "runs/ceph"]))      # a `run` column says which is which
    >>> load_steps("runs/nvme", "local-torch-w8-b256-h100x8-cold")

Everything returns a pyarrow Table, so pandas stays optional.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from .figures import StepRow
from .schema import RESULT_SCHEMA, summary_to_row
from .store import RESULTS_NAME, STEPS_NAME, cell_summaries
from .summary import CellSummary

if TYPE_CHECKING:
    import pandas


def load_run(run_dir: str | Path) -> pa.Table:
    """One row per cell: ``results.parquet``, or, where it is missing (a sweep stopped before its
    first table was written, or the table was deleted), the same rows rebuilt from the cells'
    summaries, which are the source of truth. Nothing is written to the run directory."""
    run_dir = Path(run_dir)
    path = run_dir / RESULTS_NAME
    if path.exists():
        return pq.read_table(path)
    summaries = cell_summaries(run_dir)
    if not summaries:
        raise FileNotFoundError(
            f"{run_dir}: neither {RESULTS_NAME} nor any <cell>/summary.json: is it an iobench run directory?"
        )
    return pa.Table.from_pylist([summary_to_row(s) for s in summaries], schema=RESULT_SCHEMA)


def load_summaries(run_dir: str | Path) -> list[CellSummary]:
    """A run's typed cell summaries in the sweep's order (results.parquet's rows; a cell without
    a row last). FileNotFoundError when the directory holds none."""
    summaries = cell_summaries(Path(run_dir))
    if not summaries:
        raise FileNotFoundError(f"{run_dir}: no cell results found (is it an iobench run directory?)")
    path = Path(run_dir) / RESULTS_NAME
    ids = pq.read_table(path, columns=["cell_id"]).column("cell_id").to_pylist() if path.exists() else []
    order = {cid: i for i, cid in enumerate(ids)}
    return sorted(summaries, key=lambda s: (order.get(s.cell_id, len(order)), s.cell_id))


def load_runs(run_dirs: Iterable[str | Path]) -> pa.Table:
    """The cells of several runs in one table, with a first column ``run``: each directory as given.

    Runs written by different iobench versions may differ in columns; a column one run lacks is null
    in its rows.
    """
    tables = []
    for run_dir in run_dirs:
        table = load_run(run_dir)
        tables.append(table.add_column(0, "run", pa.array([str(run_dir)] * table.num_rows, pa.string())))
    if not tables:
        raise ValueError("load_runs: no run directories given")
    return pa.concat_tables(tables, promote_options="default")


def load_steps(run_dir: str | Path, cell_id: str | None = None) -> pa.Table:
    """The per-step rows (``<cell>/steps.parquet``) of one cell, or of every cell that has them
    (failed cells have none), with a first column ``cell_id``. Warm-up steps are included and marked
    ``warmup``: filter on it for the steps the metrics use."""
    run_dir = Path(run_dir)
    if cell_id is not None:
        path = run_dir / cell_id / STEPS_NAME
        if not path.exists():
            have = sorted(p.parent.name for p in run_dir.glob(f"*/{STEPS_NAME}"))
            raise FileNotFoundError(
                f"{path} does not exist; cells of {run_dir} with steps: {', '.join(have) or 'none'}"
            )
        paths = [path]
    else:
        paths = sorted(p for p in run_dir.glob(f"*/{STEPS_NAME}") if not p.parent.name.startswith("."))
        if not paths:
            raise FileNotFoundError(f"{run_dir}: no <cell>/{STEPS_NAME}: is it an iobench run directory?")
    tables = []
    for path in paths:
        table = pq.read_table(path)
        if "cell_id" not in table.column_names:  # written before schema v4
            cells = pa.array([path.parent.name] * table.num_rows, pa.string())
            table = table.add_column(0, "cell_id", cells)
        tables.append(table)
    return pa.concat_tables(tables, promote_options="default")


def step_rows(run_dir: str | Path, cell_id: str) -> list[StepRow]:
    """One cell's steps (warm-up included) as the step loop recorded them."""
    recorded = {f.name for f in fields(StepRow)}  # not the accounts derived from them (account_*)
    return [
        StepRow(**{k: v for k, v in row.items() if k in recorded})
        for row in load_steps(run_dir, cell_id).to_pylist()
    ]


def to_pandas(table: pa.Table) -> pandas.DataFrame:
    """``table`` as a pandas DataFrame. pandas is not an iobench dependency: install it to use this."""
    try:
        import pandas  # noqa: F401  (imported here so that the error names the fix)
    except ImportError as e:
        raise ImportError("to_pandas needs pandas, which iobench does not install: pip install pandas") from e
    return table.to_pandas()
