"""How long a planned cell will take, before anything runs: `iobench sweep --dry-run` and the
sweep's first ETA (refined by the durations the sweep then measures).

A deliberately simple model, printed with the estimate (METHOD): CPU JPEG decode is what usually
binds a loader on one host, so a run is expected to process its samples at DECODE_PER_CORE samples/s
per decoding core, never faster than the emulated accelerators consume.
"""

from __future__ import annotations

from dataclasses import dataclass

from iobench.cell.demand import demand_of
from iobench.host.cores import usable_cores
from iobench.results.spec import CellSpec
from iobench.sweep.datasetspec import DatasetSpec

# simplejpeg decode + RandomResizedCrop of ~110 KiB ImageNet-like JPEGs, per core (measured ~940;
# PIL ~610): the design notes' figure, rounded down for augmentation and collation
DECODE_PER_CORE = 900.0
CELL_START_S = 4.0  # a fresh interpreter importing torch, building the tier, reading the manifest
RUN_START_S = 2.0  # per measured run: making the cache state, starting loader workers, first shard
CEILINGS_S = 15.0  # diagnose: accelerator (>= 1 s), prep from RAM (>= 3 s + the copy), fetch (<= 20 s)
CAPACITY_RUNS = 2  # diagnose, emulated accelerators: the predicted count and one more are run
# a synth dataset given by size and not generated yet: its mean sample (JPEG + tar headers)
MEAN_SAMPLE_BYTES = 112 * 1024

METHOD = (
    "Estimate, not a measurement: per measured run, samples (dataset samples x epochs, or "
    f"max_steps x batch if fewer) / (an expected {DECODE_PER_CORE:.0f} samples/s of CPU JPEG decode per "
    "core x min(workers, usable cores), workers 0 = 1 core, capped at the emulated accelerators' demand) "
    f"+ {RUN_START_S:.0f} s start-up; x repeats; + {CELL_START_S:.0f} s per cell process; diagnose adds "
    f"~{CEILINGS_S:.0f} s of ceilings and {CAPACITY_RUNS} capacity-check runs. Storage slower than decode, "
    "real torch models and other hosts will differ; the sweep's ETA corrects it by the durations it measures."
)


@dataclass(frozen=True)
class CellEstimate:
    samples: int | None  # per measured run
    samples_per_s: float  # expected rate of a measured run
    seconds: float | None  # the whole cell; None when the dataset's size is not known yet


def dataset_samples(dataset: DatasetSpec) -> int | None:
    """Samples in ``dataset``: from the sweep file, else its manifest; None when neither says."""
    from iobench.datasets.manifest import Manifest, ManifestError

    if dataset.synth and "samples" in dataset.synth:
        return dataset.synth["samples"]
    try:
        return Manifest.load(dataset.path).num_samples
    except (ManifestError, OSError):
        pass
    if dataset.synth:
        return max(1, round(dataset.synth["size_bytes"] / MEAN_SAMPLE_BYTES))
    return None


def estimate_cell(cell: CellSpec, samples_in_dataset: int | None, cores: int) -> CellEstimate:
    loader, run = cell.loader, cell.run
    # per node: every rank brings its own workers and accelerators and reads 1/nodes of the data
    ranks, nodes = run.ranks_per_node, run.nodes
    rate = DECODE_PER_CORE * min(ranks * loader.readers, cores)
    demand = demand_of(cell.accelerator)
    total_demand = demand.samples_per_s * cell.accelerator.count if demand else None
    if total_demand is not None:
        rate = min(rate, total_demand * ranks)
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
    return CellEstimate(samples, rate, CELL_START_S + extra + runs * (RUN_START_S + samples / rate))


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_plan(datasets: list[DatasetSpec], cells: list[CellSpec]) -> dict[str, CellEstimate]:
    """An estimate per cell id; reads at most each dataset's local manifest, nothing else."""
    samples = {str(d.path): dataset_samples(d) for d in datasets}
    cores = usable_cores()
    return {c.cell_id: estimate_cell(c, samples.get(c.dataset), cores) for c in cells}
