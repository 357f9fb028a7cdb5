"""What a cell is: the tier, the loader setting, the accelerator, the cache state, how it is
measured and on which dataset. The sweep plans these (iobench/sweep/), a cell process measures one
(iobench/cell/), and every result carries the spec it was measured with (``summary.cell``), which
is how ``--resume`` knows a result still answers the planned cell.

Loader defaults are ``loaders.config``'s (``default``): the drop-in loaders and the sweep share them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from loaders.config import OnError, PipelineSpec, default

from .checkpoint import CheckpointSettings
from .choices import AcceleratorKind, CacheMode, ComputeDist, DemandKind, Layout, SyncMode, WindowNeed, values


def bounded(default: Any, *, least: float | None = None, most: float | None = None, said: str = "") -> Any:
    """A field the sweep file may set, held to [least, most]; ``said``: what it is, in words for an
    error (sweep/schema.py reads these)."""
    return field(default=default, metadata={"least": least, "most": most, "said": said})


CACHE_MODES = values(CacheMode)
SYNC_MODES = values(SyncMode)
LAYOUTS = values(Layout)


@dataclass(frozen=True)
class LoaderSettings:
    kind: str  # a name in the loaders' registry
    workers: int
    batch_size: int
    prefetch: int = default("prefetch")
    shuffle_buffer: int = default("shuffle_buffer")
    layout: Layout = "shards"
    options: dict[str, Any] = field(default_factory=dict)  # the backend's declared options
    # False: samples are read in full but not decoded or augmented (MLPerf Storage's reading)
    decode: bool = default("decode")
    # CPU ms of extra work per sample in the augment stage (loaders.config.PipelineSpec)
    augment_cpu_ms: float = default("augment_cpu_ms")
    # ... and in the decode stage
    decode_cpu_ms: float = default("decode_cpu_ms")
    # False: whole images decoded, then cropped (True: the crop box alone, where the region decoder is built)
    decode_roi: bool = default("decode_roi")

    @property
    def readers(self) -> int:
        """Processes (or threads) that read and decode: the workers, or the main process."""
        return max(1, self.workers)

    def pipeline(self, run: RunSettings) -> PipelineSpec:
        """What each reader of this setting does, under the run's seed and error policy."""
        return PipelineSpec(
            batch_size=self.batch_size,
            shuffle_buffer=self.shuffle_buffer,
            seed=run.seed,
            on_error=run.on_error,
            decode=self.decode,
            augment_cpu_ms=self.augment_cpu_ms,
            decode_cpu_ms=self.decode_cpu_ms,
            decode_roi=self.decode_roi,
            max_lost_fraction=None,  # a cell completes and reports what an epoch lost
        )


@dataclass(frozen=True)
class ComputeSpec:
    """How an emulated accelerator's device time varies from step to step (accelerators/jitter.py)."""

    dist: ComputeDist
    cv: float  # the device time's coefficient of variation: sd / mean
    seed: int  # rank r draws from numpy's SeedSequence([seed, r])
    source: str = "given in the sweep file"  # or the calibration the cv came from


@dataclass(frozen=True)
class AcceleratorSpec:
    kind: AcceleratorKind = "emulated"
    type: str | None = None  # emulated: h100, a100, ..., custom
    model: str = "resnet50"
    demand: DemandKind = "training"
    count: int = bounded(1, least=1)
    samples_per_s: float | None = None  # type "custom": a demand given in the sweep file
    # emulated: whose trainer host work each step does ("none", or a model); None: its own model's
    # (none at demand mlperf_storage). accelerators/hostcost.py, docs/method.md
    host_work: str | None = None
    compute: ComputeSpec | None = None  # emulated: the device time's distribution; None: constant

    @property
    def label(self) -> str:
        """``h100x8`` for an emulated accelerator and its count, ``torch:resnet50`` for a real model."""
        return f"{self.type}x{self.count}" if self.kind == "emulated" else f"torch:{self.model}"

    @property
    def name(self) -> str:
        """The accelerator as results.parquet names it: its type, or ``torch:<model>``."""
        return self.type or "" if self.kind == "emulated" else f"torch:{self.model}"


@dataclass(frozen=True)
class InterconnectSpec:
    """The training fabric a multi-rank cell's all-reduce is modelled on (configs/interconnects.yaml)."""

    name: str
    bandwidth_bytes_per_s: float  # what one rank sends (and receives) per second, one direction
    latency_s: float  # one ring step
    source: str = ""


@dataclass(frozen=True)
class MinMeasure:
    """The least a cell measures after its warm-up (``run.min_measure``): a cell whose requested
    epochs give less runs more epochs over the data until it has both (or ``run.max_steps`` stops it).
    ``need: either`` is enough with the steps or the seconds (analysis/window.py: the probe's rule,
    for jobs whose steps are slow)."""

    seconds: float = bounded(5.0, least=0, said="the least seconds a cell measures after its warm-up")
    steps: int = bounded(50, least=0, said="the least steps a cell measures after its warm-up")
    need: WindowNeed = "both"

    def describe(self) -> str:
        return f"{self.steps} steps {'and' if self.need == 'both' else 'or'} {self.seconds:g} s"


@dataclass(frozen=True)
class RunSettings:
    """The sweep file's ``run:`` section as one cell uses it: how the cell is measured."""

    # a count, or detected from the step series (MSER)
    warmup_steps: Literal["auto"] | int = bounded("auto", least=0)
    max_steps: int | None = bounded(None, least=1)
    epochs: int = bounded(1, least=1)
    on_error: OnError = default("on_error")  # noqa: RUF009 (an immutable str)
    seed: int = bounded(default("seed"), least=0)
    timeout_s: int = bounded(900, least=1)
    stall_timeout: int = bounded(120, least=1)  # seconds without a batch before the watchdog fails the cell
    repeats: int = bounded(1, least=1)
    diagnose: bool = False  # differential ceilings and, for emulated accelerators, the capacity answer
    ranks_per_node: int = bounded(
        1, least=1
    )  # torch.distributed ranks on each node (one loader + step loop each)
    nodes: int = bounded(1, least=1)
    record_keys: bool = False  # keep every delivered sample's key (<cell>/keys.parquet): a check
    sync: SyncMode = "allreduce"  # a one-rank cell has nobody to wait for
    interconnect: InterconnectSpec | None = None  # the fabric of the modelled all-reduce
    # the share of a step's compute the all-reduce hides behind (DDP overlaps gradient buckets with
    # the backward pass, about two thirds of a step): only what sticks out of it is waited for
    allreduce_overlap: float = bounded(0.67, least=0, most=1, said="a share of the step's compute")
    min_measure: MinMeasure = field(default_factory=MinMeasure)

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node


@dataclass(frozen=True)
class CellSpec:
    """One measurement: a tier, a loader setting, an accelerator and a cache state, on a dataset."""

    cell_id: str
    tier: dict[str, Any]  # the tier plugin's options, with its kind and name
    loader: LoaderSettings
    accelerator: AcceleratorSpec
    cache: CacheMode
    run: RunSettings
    dataset: str  # the local dataset directory (generated or given)
    # a checkpoint cell: the trainer saves its state every K steps (results/checkpoint.py); None: none
    checkpoint: CheckpointSettings | None = None

    @property
    def tier_name(self) -> str:
        return str(self.tier.get("name", self.tier.get("kind", "")))

    @property
    def tier_kind(self) -> str:
        return str(self.tier.get("kind", ""))

    @property
    def mlperf_mode(self) -> bool:
        """Does what MLPerf Storage does: reads each sample's bytes without decoding them, for an
        accelerator emulated at MLPerf Storage's compute time."""
        return not self.loader.decode and self.accelerator.demand == "mlperf_storage"

    def samples_per_repeat(self, samples_in_dataset: int | None) -> int | None:
        """Samples one measured repeat of one rank goes through: its share of the dataset x epochs,
        or max_steps x batch if fewer; None when neither is known."""
        samples = samples_in_dataset * self.run.epochs if samples_in_dataset is not None else None
        if self.run.max_steps:
            cap = self.run.max_steps * self.loader.batch_size
            samples = min(samples, cap) if samples is not None else cap
        return samples
