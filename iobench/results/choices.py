"""The allowed values of a cell's settings and results, as types: each set is written once here, and
the checks, the codec (a value read back must be one of its type's) and the docs take it from the
type (``typing.get_args``)."""

from __future__ import annotations

from typing import Literal, get_args

CacheMode = Literal["cold", "warm", "as-is"]  # what a cell asks of the caches before it measures
CacheAchieved = Literal["cold", "warm", "partly-cold", "unknown"]  # what it measured it got
# how the ranks of a multi-rank cell end each step: a gradient all-reduce (a real collective plus
# the modelled fabric time), only the collective, or not at all (ranks run free of each other)
SyncMode = Literal["allreduce", "barrier", "none"]
Layout = Literal["shards", "objects"]  # objects: one object per sample (iobench dataset objects)
AcceleratorKind = Literal["emulated", "torch"]
DemandKind = Literal["training", "mlperf_storage"]
# an emulated accelerator's device time per step (accelerators/jitter.py)
ComputeDist = Literal["constant", "normal", "gamma", "lognormal", "uniform", "exponential"]
# what binds a cell (analysis/verdict.py), and in a multi-rank cell its ranks' waits for each other;
# "cores": the trainer, the readers and the rest of the host together filled the usable cores
Bound = Literal["accelerator", "host", "cores", "prep", "fetch", "unknown", "straggler", "allreduce"]
# the parts of the pipeline the differential method runs alone (cell/diagnosis/ceilings.py): the
# accelerator fed from memory, the readers' preparation from RAM, the fetch from the tier
CeilingPart = Literal["accelerator", "prep", "fetch"]
# the parts the differential method weighs: the ceilings, and the cores' when the loader and the
# step share them (analysis/cores.py); the one with the lowest is what it says binds
DifferentialPart = Literal[CeilingPart, "cores"]
# the parts of a step's account, in the order a step runs them (analysis/ledger.py): every second of
# a cell's wall falls in exactly one; StepAccount has a field of each name
AccountPart = Literal[
    "loop",
    "loader_start",
    "fetch",
    "decode",
    "augment",
    "collate",
    "unsplit",
    "handover",
    "peer_wait",
    "h2d",
    "device",
    "host",
    "allreduce",
    "checkpoint",
]
# what a measured window needs after its warm-up: both run.min_measure's steps and its seconds, or
# either (the probe's rule: a job of slow steps measures seconds)
WindowNeed = Literal["both", "either"]
# how a cell read its samples (analysis/mlperf.py)
Reading = Literal["mlperf", "no decode", "decode"]
Status = Literal["ok", "failed", "interrupted"]
# how a training loop saves a checkpoint (docs/checkpoints.md): blocked for the whole write; for a copy
# into fresh host memory then written in the background (DCP's default staging); for a copy into
# reused, pinned host buffers then written in the background
CheckpointMode = Literal["sync", "async", "async_pinned"]
# what writes it: iobench's own DCP writer, torch's FileSystemWriter, s3torchconnector's DCP writer,
# torch's fsspec writer (s3fs for s3://)
CheckpointWriter = Literal["iobench", "stock", "s3torchconnector", "fsspec"]
CheckpointIo = Literal["buffered", "direct"]  # a file store through the page cache, or O_DIRECT


def values(choice: object) -> tuple[str, ...]:
    """The values a Literal type allows."""
    return get_args(choice)
