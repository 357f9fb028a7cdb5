"""A checkpoint cell's settings (what it saves, where, how often, in which mode) and what it measured
(each save, the restores, the cost to training), as typed records. Every figure is defined in
docs/method.md (Checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .choices import CheckpointIo, CheckpointMode, CheckpointWriter
from .figures import Latency


@dataclass(frozen=True)
class CheckpointDestination:
    """Where a cell's checkpoints go: a location on one of the sweep's tiers (whose connection it
    uses), written by ``writer``; ``io`` for a file store."""

    name: str
    tier: dict[str, Any]  # the tier mapping (kind, options) the location is on
    location: str  # a directory, s3://bucket/prefix or rados://pool/prefix
    writer: CheckpointWriter = "iobench"
    io: CheckpointIo = "buffered"


@dataclass(frozen=True)
class CheckpointSettings:
    destination: CheckpointDestination
    mode: CheckpointMode
    every_steps: int
    state_bytes: int  # every rank's together, per checkpoint
    state_said: str  # how the size was chosen ("llama3-8b scaled to ...")
    model: str | None = None
    restore: bool = True  # restore the last checkpoint after training, cold then warm
    keep: int = 2  # checkpoints kept: the newest and the one before it


@dataclass(frozen=True)
class SaveFigures:
    """One save on one rank (times in seconds since the cell's loader was built)."""

    step: int
    rank: int
    bytes: int
    blocked_s: float  # what the training loop waited for this save (the previous one's end included)
    waited_previous_s: float  # of that, waiting for the previous background save to finish
    write_s: float  # from the save's start to its commit (sync: the blocked time)
    start_s: float
    end_s: float  # when it was committed
    sync_s: float = 0.0  # of the write, the final fsync


@dataclass(frozen=True)
class TransferFigures:
    """Saves or restores summed: bytes, seconds, rates per rank and per node, request latency."""

    count: int
    bytes: int  # every rank's, all of them
    seconds_mean: float  # per save or restore (the slowest rank's)
    seconds_max: float
    gb_per_s_per_rank: float  # a rank's bytes over its own seconds, mean over ranks
    gb_per_s_per_node: float  # a node's ranks' bytes over the slowest one's seconds
    request_ms: Latency = field(default_factory=Latency)  # per request (a part or a file)
    device_bytes: int | None = None  # what reached this host's block devices meanwhile (local stores)


@dataclass(frozen=True)
class CheckpointCost:
    """What checkpointing cost the training loop, from the cell's step ledger (docs/method.md)."""

    saves: int
    every_steps: int
    blocked_s_per_save: float  # mean over saves
    blocked_fraction: float  # blocked over the measured wall
    slowed_steps: int  # steps that ran while a background write did
    slowed_step_ratio: float | None  # their mean span over the other steps' (None: none slowed)
    slowed_extra_fraction: float  # the seconds the slowed steps took beyond a clean step's, over the wall
    au_with: float  # AU over every measured step
    # AU over the steps no save touched (neither blocked nor slowed); None: every step was (the saves
    # outlast the interval), so it was not measured
    au_without: float | None
    cost: float | None  # au_without - au_with: the accelerator time checkpointing took
    clean_step_s: float | None = None  # a clean step's mean span (what an interval of K steps lasts)


@dataclass(frozen=True)
class CheckpointFigures:
    settings: CheckpointSettings
    writer: str  # the writer in words ("iobench (O_DIRECT)", "s3torchconnector DCP")
    where: str  # the tier in words
    saves: tuple[SaveFigures, ...]
    save: TransferFigures
    restore_cold: TransferFigures | None
    restore_warm: TransferFigures | None
    cold_method: str  # how the restore was made cold ("drop_caches", "posix_fadvise(DONTNEED)", ...)
    cost: CheckpointCost | None
    verdict: str  # the sentence (analysis/checkpointverdict.py)
    ranks_per_node: int = 1
    nodes: int = 1
    # a file store's device, measured by fio in the same directory right after the cell (None: not a
    # local file store, or no fio): its direct sequential write and read, GB/s
    fio_write_gb_per_s: float | None = None
    fio_read_gb_per_s: float | None = None
    # one more save of the same state after training, the loader gone: the tier's own rate, what
    # fio's write is set against (the saves during training share the cores with the loader)
    save_alone: TransferFigures | None = None
