"""A cell's figures as MLPerf Storage reports them, so a submitter can put them beside DLIO's.

DLIO (MLPerf Storage's engine) computes AU per epoch (analysis/metrics.py, ``dlio_au``), reports
their mean and standard deviation, and passes a run whose mean reaches the workload's threshold
(``train_au_meet_expectation``). Its "MB/s" is samples/s times a nominal record size; here it is
the bytes the loader really read.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from iobench.results.choices import Reading
from iobench.results.figures import EpochFigures, MlperfFigures, PipelineMetrics
from iobench.results.spec import CellSpec

MIB = 2**20
# what each way of reading means, for the summary and every report that names it
READING = {
    "mlperf": "MLPerf mode: each sample's bytes read in full, not decoded or augmented; MLPerf Storage's compute time",
    "no decode": "each sample's bytes read in full, not decoded or augmented",
    "decode": "decoded and augmented, as training does",
}


def reading_of(cell: CellSpec) -> Reading:
    """How ``cell`` reads its samples: a key of READING."""
    if cell.loader.decode:
        return "decode"
    return "mlperf" if cell.mlperf_mode else "no decode"


def mlperf_figures(
    epochs: Sequence[EpochFigures],
    metrics: PipelineMetrics,
    accelerators: int,
    threshold: float | None,
    read: Reading = "decode",
) -> MlperfFigures | None:
    """None when no epoch has a DLIO AU (fewer than two steps in each)."""
    au = tuple(e.au_mlperf for e in epochs if e.au_mlperf is not None)
    if not au:
        return None
    mean = statistics.fmean(au)
    return MlperfFigures(
        accelerators=accelerators,
        epoch_au=au,
        au_mean=mean,
        au_stdev=statistics.pstdev(au),  # DLIO's np.std: the population form
        threshold=threshold,
        passed=None if threshold is None else mean >= threshold,
        samples_per_s=metrics.samples_per_s,
        mib_per_s=metrics.bytes_per_s / MIB,
        reading=read,
    )
