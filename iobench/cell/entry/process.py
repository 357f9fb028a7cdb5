"""One cell, in a process of its own: prepare the tier, run the step loop, write the results.

    python -m iobench.cell.entry.process CELL.json RUN_DIR

A fresh process per cell keeps one cell's workers, page-cache warmth in the interpreter, imported
decoders and torch thread pools from leaking into the next cell's numbers.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from iobench.accelerators.consumers import EmulatedAccelerator, make_consumer
from iobench.analysis.cellfigures import analyse_cell
from iobench.analysis.cores import shared_ceiling
from iobench.analysis.differential import combine, input_ceiling
from iobench.analysis.verdict import trainer_alone
from iobench.cell.diagnosis.diagnose import check_capacity, measure_ceilings
from iobench.cell.entry.shared import cell_arguments, setup_facts, warmup_method
from iobench.cell.files import cell_files
from iobench.cell.inputs import cell_inputs
from iobench.cell.lifeline import die_with_parent
from iobench.cell.live import live_file
from iobench.cell.measure import measure
from iobench.host.cores import usable_cores
from iobench.results.spec import CellSpec
from iobench.results.store import SUMMARY_NAME, publish_cell
from iobench.results.summary import CellSummary, utc_now
from iobench.tiers.faults import explain


def run_cell(cell: CellSpec, run_dir: Path) -> CellSummary:
    """Measure one cell and publish its directory; returns the summary."""
    started = utc_now()
    inputs = cell_inputs(cell, make_consumer(cell.accelerator, cell.loader.batch_size), usable_cores())
    consumer, run = inputs.consumer, cell.run
    ceilings = measure_ceilings(inputs) if run.diagnose else None
    live = live_file()
    runs = []
    for i in range(run.repeats):
        if live:  # measure() prepares the tier (a warm fill may take long) before its step loop
            live.pause(f"preparing the tier for measured run {i + 1}")
        runs.append(measure(inputs))
    if live:
        live.pause("computing and writing the results")
    figures = analyse_cell(runs, setup_facts(inputs))
    chosen = runs[figures.chosen]
    metrics = chosen.metrics
    attribution = None
    if ceilings is not None:
        answer = None
        if isinstance(consumer, EmulatedAccelerator):
            assert ceilings.prep is not None and ceilings.fetch is not None  # a cell measures all three
            ceiling = input_ceiling(
                ceilings.prep.samples_per_s, ceilings.fetch.samples_per_s, metrics.samples_per_s
            )
            # what the trainer takes where a quiet host timed it short of its demand (the verdict's rule)
            takes = trainer_alone(metrics, consumer.demand_samples_per_s).takes
            answer = check_capacity(inputs, ceiling, takes / consumer.count if takes else None)
        v = chosen.verdict
        shared = shared_ceiling(v.cores, v.budget, inputs.cores) if v.cores is not None else None
        attribution = combine(
            ceilings.rates() | ({"cores": shared} if shared else {}),
            chosen.verdict,
            measured_samples_per_s=metrics.samples_per_s,
            au=metrics.au,
            capacity=answer,
        )
    files = cell_files(
        inputs,
        runs,
        figures,
        warmup=warmup_method(chosen, run),
        started=started,
        ceilings=ceilings,
        attribution=attribution,
    )
    files.publish(run_dir)
    return files.summary


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    cell, run_dir = cell_arguments(argv, "python -m iobench.cell.entry.process")
    try:
        run_cell(cell, run_dir)
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)  # the sweep keeps it in the cell's log (cell.log)
        message = explain(exc, cell.tier)  # the cause and the likely reason, two lines
        publish_cell(run_dir, cell.cell_id, {SUMMARY_NAME: CellSummary.failed(cell, message)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
