"""What the cell's entry points share (process.py, the cell alone; rank.py, one rank of a job): their
command line, the cell read from its file, the warm-up's method, and what the cell's figures are
told of its setup (``analyse_cell``'s facts), the notes it says of itself included."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from iobench.accelerators.consumers import Consumer
from iobench.accelerators.demand import mlperf_au_threshold
from iobench.analysis.cellfigures import SetupFacts
from iobench.cell.inputs import CellInputs
from iobench.cell.ranks.allreduce import allreduce_model, gradient_size_known
from iobench.cell.records import Measurement
from iobench.cell.steps.loaderfactory import decoder_notes
from iobench.results.codec import from_json
from iobench.results.spec import CellSpec, RunSettings


def cell_arguments(argv: list[str] | None, command: str) -> tuple[CellSpec, Path]:
    """The cell and the run directory an entry point is given (``CELL.json RUN_DIR``, after
    ``command``); given something else, its usage said and the process ends with status 2, as a
    command line's parser does."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(f"usage: {command} CELL.json RUN_DIR", file=sys.stderr)
        raise SystemExit(2)
    return read_cell(Path(args[0])), Path(args[1])


def read_cell(path: Path) -> CellSpec:
    return from_json(CellSpec, json.loads(path.read_text()))


def warmup_method(m: Measurement, run: RunSettings) -> str:
    return m.steady.method if m.steady else f"fixed: run.warmup_steps={run.warmup_steps}"


def setup_facts(inputs: CellInputs) -> SetupFacts:
    """What the cell's figures need of its setup: the modelled all-reduce, MLPerf Storage's pass
    mark, the dataset's size and the tier's word on its server's caches, and the setup's notes."""
    cell, consumer = inputs.cell, inputs.consumer
    model = allreduce_model(cell.run, cell.accelerator, consumer)
    server = getattr(inputs.tier, "server_caches", None)  # object stores and Ceph say theirs
    return SetupFacts(
        cell=cell,
        exposed_allreduce=model.exposed if model else None,
        mlperf_threshold=mlperf_au_threshold(cell.accelerator.model),
        dataset_bytes=inputs.manifest.total_bytes,
        server_caches=server() if server is not None else None,
        notes=(
            *host_work_warnings(consumer),
            *allreduce_warnings(cell, consumer),
            *decoder_notes(cell.loader),
        ),
    )


def host_work_warnings(consumer: Consumer) -> list[str]:
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


def allreduce_warnings(cell: CellSpec, consumer: Consumer) -> list[str]:
    """A fabric named but no gradient size to move over it: the prediction at scale leaves it out."""
    if cell.run.interconnect is None or gradient_size_known(cell.accelerator, consumer):
        return []
    return [
        f"all-reduce not modelled: configs/accelerators.yaml has no parameter count for {cell.accelerator.model}, "
        "so the synchronous AU predicted at scale has no all-reduce in it (MLPerf Storage's computation_time "
        "is its whole step)"
    ]
