"""What a cell measured (``<cell>/summary.json``) and where (``<cell>/manifest.json``), as typed
records: written by the cell process, read by the sweep, the report, compare and recommend.

Reading goes through :func:`iobench.results.codec.from_json`, so a summary of an older schema
(v3) loads with the fields it lacks at their defaults, and one of a newer schema loads with the
fields this version does not know ignored. Every figure is defined in docs/method.md.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import socket
from dataclasses import dataclass, field
from typing import Any

from iobench.host.cores import usable_cores
from iobench.host.machine import cpu_model
from iobench.host.memory import usable_memory
from loaders.storage import ResolvedClient

from .checkpoint import CheckpointFigures
from .choices import Status, values
from .figures import (
    Attribution,
    CacheState,
    Ceilings,
    Distributed,
    EpochFigures,
    LoaderStats,
    MlperfFigures,
    PipelineMetrics,
    RankFigures,
    RepeatSummary,
    SampleLoss,
    ScalePoint,
    StepTimes,
    Verdict,
    WallSplit,
    Window,
)
from .spec import CellSpec

# 9: one judge: verdict.budget (where the window's cores went) and verdict.cores (the cores per
#    accelerator), the verdict "cores"; metrics.trainer_alone_* (its median step alone with its
#    interval, whether the host was quiet, the cores others used meanwhile); run.min_measure.need;
#    the cores_* and budget_* columns; checkpoint cells: summary.checkpoint (saves, restores cold
#    and warm, the cost to training), steps.parquet checkpoint_s and account_checkpoint_s, the wall
#    split's checkpoint share; within 9, summary.client (the object client that read) and its column
# 8: one ledger per step: AU is device busy / wall everywhere (the epochs' au and au_mlperf too);
#    summary.split (the wall split, every part named, summing to 1) replaces attribution.lost_fraction;
#    steps.parquet open_s, decode_s, augment_s, collate_s, reader_cpu_s and each step's account;
#    epochs' window_s and window_au; metrics.trainer_cores and trainer_alone_samples_per_s (the
#    trainer's own CPU, the readers' counted once); window.au_rel_ci; prediction errors are
#    predicted / measured - 1
# 7: compute jitter: steps.parquet compute_draw_s (an emulated accelerator's drawn device time),
#    summary.step_times (the compute's spread), consumer.compute (the distribution and its seed)
# 6: the trainer's host: steps.parquet device_s and trainer_cpu_s; device_busy_s, au_basis,
#    step_alone_s, trainer_slowdown, trainer_cpu_ms_per_step, loader_cores; AU is device busy / wall;
#    the verdict "host"; the mean GPU utilisation NVML sampled (gpu_utilization_pct)
# 5: the measured window (summary.window, window_* columns); the MLPerf Storage view (summary.mlperf,
#    mlperf_* and mib_per_s columns, each epoch's au and au_mlperf); device reads are the cell's own
#    processes' (device_read_bytes_per_s), the host's counters kept as context
# 4: typed records; summary.cell as written by the typed spec (loader.options, no run.cache
#    list); steps.parquet and telemetry.parquet carry cell_id; the schema version is in the
#    Parquet metadata of results.parquet
# 3: multi-rank cells (world_size .. rank_au_max; steps.parquet rank)
SCHEMA_VERSION = 9
STATUSES = values(Status)


@dataclass(frozen=True)
class Warmup:
    steps: int  # leading steps left out of every metric
    method: str  # "MSER, 5-step grid", or the fixed count given


@dataclass(frozen=True)
class RepeatFigures:
    """One measured repeat of the cell (the summary's figures are the median repeat's)."""

    samples_per_s: float
    au: float
    cache: str | None  # the cache state it achieved


@dataclass(frozen=True)
class Stability:
    """The repeats' spread: mean, interval and instability of samples/s and AU."""

    samples_per_s: RepeatSummary
    au: RepeatSummary

    @property
    def unstable(self) -> bool:
        return self.samples_per_s.unstable or self.au.unstable


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class CellSummary:
    """A cell's result. ``status`` ok: every measured field is set; failed or interrupted: ``error``
    says why and the measured fields are empty."""

    status: Status
    cell: CellSpec
    schema_version: int = SCHEMA_VERSION
    error: str | None = None
    metrics: PipelineMetrics | None = None
    verdict: Verdict | None = None
    stage_ms_per_sample: dict[str, float] = field(default_factory=dict)  # reader wall time per stage
    stage_cpu_ms_per_sample: dict[str, float] = field(default_factory=dict)  # reader thread CPU
    loader_stats: LoaderStats = field(default_factory=LoaderStats)  # measured steps
    loader_stats_all_steps: LoaderStats = field(default_factory=LoaderStats)  # warm-up included
    cache_state: CacheState | None = None
    epochs_completed: int = 0
    epochs: tuple[EpochFigures, ...] = ()
    losses: SampleLoss | None = None  # samples the completed epochs did not deliver (None: none lost)
    warmup: Warmup | None = None
    window: Window | None = None  # what the chosen repeat measured after its warm-up (v5+)
    mlperf: MlperfFigures | None = None  # the figures as MLPerf Storage reports them (v5+)
    repeats: tuple[RepeatFigures, ...] = ()
    stability: Stability | None = None
    ceilings: Ceilings | None = None  # diagnose: accelerator, prep, fetch; a probed job: two of them
    attribution: Attribution | None = None
    warnings: tuple[str, ...] = ()
    # the JPEG decoder its readers used, by name (loaders.pipeline.decoder_name): the crop region's
    # or the whole image's; None where nothing was decoded or DALI decoded in its own graph
    decoder: str | None = None
    split: WallSplit | None = None  # v8+: where the measured window's wall went (docs/method.md)
    epoch_delta: float | None = None
    epoch1_vs_steady: float | None = None
    device_read_bytes: dict[str, int] = field(default_factory=dict)  # per block device, host-wide
    tier_device: str | None = None
    # the object client the tier read through, by name (Tier.object_client; the client column);
    # None where it reads through none, for a cell that did not finish, and in older summaries
    client: ResolvedClient | None = None
    # v5+: what the cell's own processes caused to be read from block devices, per second of the
    # measured window (before v5: the tier's device, host-wide, now host_device_read_bytes_per_s)
    device_read_bytes_per_s: float | None = None
    read_call_bytes_per_s: float | None = None  # v5+: what their read calls returned, caches included
    cell_device_read_bytes: int | None = None  # v5+: the cell's processes from block devices, whole repeat
    host_device_read_bytes_per_s: float | None = None  # v5+: the tier's device, every process on the host
    cpu_percent_per_core: tuple[float, ...] = ()
    gpu_utilization_pct: float | None = None  # NVML, mean over the GPUs and the window (v6+)
    consumer: dict[str, Any] = field(default_factory=dict)  # the accelerator's own description
    step_times: StepTimes | None = None  # v7+: the spread of the compute per measured step
    distributed: Distributed | None = None  # multi-rank cells
    ranks: tuple[RankFigures, ...] = ()
    # synchronous AU predicted at scale from this cell's steps (analysis/scale.py)
    scale: tuple[ScalePoint, ...] = ()
    scale_method: str | None = None
    # requests the model let each rank's loader have in flight (workers x prefetch; 0: no queue)
    scale_queue_depth: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    checkpoint: CheckpointFigures | None = None  # v9+: a checkpoint cell's saves, restores and cost

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cell_id(self) -> str:
        return self.cell.cell_id

    @classmethod
    def failed(cls, cell: CellSpec, error: str, *, status: Status = "failed", started_at: str | None = None):
        """The result of a cell that did not finish: what it was, why, and when."""
        return cls(status=status, cell=cell, error=error, started_at=started_at, finished_at=utc_now())


@dataclass(frozen=True)
class HostInfo:
    hostname: str
    platform: str
    cpu_model: str
    logical_cpus: int | None
    usable_cpus: int
    memory_bytes: int
    cuda: bool

    @classmethod
    def here(cls, *, cuda: bool, usable_cpus: int | None = None) -> HostInfo:
        """This machine; ``usable_cpus`` where the caller counted them (default: this process's)."""
        return cls(
            hostname=socket.gethostname(),
            platform=platform.platform(),
            cpu_model=cpu_model(),
            logical_cpus=os.cpu_count(),
            usable_cpus=usable_cores() if usable_cpus is None else usable_cpus,
            memory_bytes=usable_memory().total,  # a container's limit where it has one
            cuda=cuda,
        )


@dataclass(frozen=True)
class DatasetInfo:
    location: str  # where the tier reads it
    format: str
    num_samples: int
    total_bytes: int
    shards: int
    mean_sample_bytes: float
    source: dict[str, Any] = field(default_factory=dict)  # generator or pack parameters


@dataclass(frozen=True)
class CellManifest:
    """Where and with what a cell was measured."""

    host: HostInfo
    versions: dict[str, str]
    cell: CellSpec
    tier: dict[str, Any]  # the tier's own description (file system, device, RAID, cache, endpoint)
    cache_state: CacheState
    dataset: DatasetInfo
    stage_names: tuple[str, ...]
    schema_version: int = SCHEMA_VERSION
