"""How long a planned cell will take, before anything runs: `iobench sweep --dry-run` and the
sweep's first ETA (refined by the durations the sweep then measures).

A deliberately simple model, printed with the estimate (:func:`method`): CPU JPEG decode is what
usually binds a loader on one host, so a run is expected to process its samples at the host's
per-core decode + augment rate (analysis/decoderate.py: this host's calibration, else the reference
assumption) per decoding core, never faster than the emulated accelerators consume.
"""

from __future__ import annotations

from dataclasses import dataclass

from iobench.accelerators.demand import demand_of
from iobench.analysis.decoderate import REFERENCE_SAMPLE_BYTES, DecodeRate
from iobench.host.cores import usable_cores
from iobench.results.spec import CellSpec
from iobench.sweep.datasetspec import DatasetSpec

CELL_START_S = 4.0  # a fresh interpreter importing torch, building the tier, reading the manifest
RUN_START_S = 2.0  # per measured run: making the cache state, starting loader workers, first shard
CEILINGS_S = 15.0  # diagnose: accelerator (>= 1 s), prep from RAM (>= 3 s + the copy), fetch (<= 20 s)
CAPACITY_RUNS = 2  # diagnose, emulated accelerators: the predicted count and one more are run
# a synth dataset not generated yet: its mean sample is its sample_size (the JPEG) and about this
# much of tar headers and padding (2 KiB: the 110 KiB default's sample was ~112 KiB)
SAMPLE_OVERHEAD_BYTES = 2 * 1024


def method(rate: DecodeRate) -> str:
    return (
        "Estimate, not a measurement: per measured run, samples (dataset samples x epochs, or "
        f"max_steps x batch if fewer) / (CPU decode + augment of {rate.describe(REFERENCE_SAMPLE_BYTES)}, "
        "at each dataset's sample size, x min(workers, usable cores), workers 0 = 1 core, capped at the "
        "emulated accelerators' demand; a cell that does not decode runs at that demand), at least run.min_measure's seconds unless max_steps is set, "
        f"+ {RUN_START_S:.0f} s start-up; x repeats; + {CELL_START_S:.0f} s per cell process; diagnose adds "
        f"~{CEILINGS_S:.0f} s of ceilings and {CAPACITY_RUNS} capacity-check runs. Storage slower than decode, "
        "real torch models and other hosts will differ; the sweep's ETA corrects it by the durations it measures."
    )


@dataclass(frozen=True)
class CellEstimate:
    samples: int | None  # per measured run
    samples_per_s: float  # expected rate of a measured run
    seconds: float | None  # the whole cell; None when the dataset's size is not known yet


def dataset_size(dataset: DatasetSpec) -> tuple[int | None, float]:
    """Samples in ``dataset`` and their mean bytes: its manifest, else the sweep file (a synth
    dataset not generated yet: its samples, or its size over its sample_size and tar overhead);
    (None, the reference size) when neither says."""
    from iobench.datasets.manifest import Manifest, ManifestError

    jpeg_bytes = dataset.synth_jpeg_bytes
    planned = None if jpeg_bytes is None else jpeg_bytes + SAMPLE_OVERHEAD_BYTES
    try:
        m = Manifest.load(dataset.path)
        return m.num_samples, float(m.mean_sample_bytes or planned or REFERENCE_SAMPLE_BYTES)
    except (ManifestError, OSError):
        pass
    if dataset.synth is None or planned is None:
        return None, REFERENCE_SAMPLE_BYTES
    if "samples" in dataset.synth:
        return dataset.synth["samples"], planned
    return max(1, round(dataset.synth["size_bytes"] / planned)), planned


def estimate_cell(
    cell: CellSpec,
    samples_in_dataset: int | None,
    cores: int,
    decode: DecodeRate,
    sample_bytes: float = REFERENCE_SAMPLE_BYTES,
) -> CellEstimate:
    loader, run = cell.loader, cell.run
    # per node: every rank brings its own workers and accelerators and reads 1/nodes of the data
    ranks, nodes = run.ranks_per_node, run.nodes
    rate = decode.per_core(sample_bytes) * min(ranks * loader.readers, cores)
    demand = demand_of(cell.accelerator)
    total_demand = demand.samples_per_s * cell.accelerator.count if demand else None
    if total_demand is not None:
        # not decoding, the CPU does not limit it: the accelerators' pace does (storage is not modelled)
        rate = min(rate, total_demand * ranks) if loader.decode else total_demand * ranks
    per_rank = None if samples_in_dataset is None else -(-samples_in_dataset // (ranks * nodes))
    samples = cell.samples_per_repeat(per_rank)
    samples = samples * ranks if samples is not None else None
    if samples is None:
        return CellEstimate(None, rate, None)
    runs = run.repeats
    extra = 0.0
    if run.diagnose:
        extra = CEILINGS_S
        runs += CAPACITY_RUNS if total_demand is not None else 0
    seconds = samples / rate
    if run.max_steps is None:  # a short window runs more epochs until run.min_measure is reached
        seconds = max(seconds, run.min_measure.seconds)
    return CellEstimate(samples, rate, CELL_START_S + extra + runs * (RUN_START_S + seconds))


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_plan(
    datasets: list[DatasetSpec], cells: list[CellSpec], decode: DecodeRate
) -> dict[str, CellEstimate]:
    """An estimate per cell id; reads at most each dataset's local manifest, nothing else."""
    sizes = {str(d.path): dataset_size(d) for d in datasets}
    cores = usable_cores()
    out = {}
    for c in cells:
        samples, sample_bytes = sizes.get(c.dataset, (None, REFERENCE_SAMPLE_BYTES))
        out[c.cell_id] = estimate_cell(c, samples, cores, decode, sample_bytes)
    return out
