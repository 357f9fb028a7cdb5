"""The job and one node of the cluster it runs on, as recommend prices it: every figure of a node
is one node's; the cluster is its nodes alike."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from iobench.accelerators.demand import ReadCpu
from iobench.analysis.decoderate import ASSUMED, DecodeRate

from .calibrate import Figure
from .mixrule import MixRule
from .model import Requirement, required
from .rates import MeasuredRates
from .units import Units

Decoding = Literal["jpeg", "none"]


@dataclass(frozen=True)
class Scenario:
    """The job and one node of the cluster it runs on: the node's figures are per node."""

    dataset_bytes: float
    sample_bytes: float
    accelerators: int  # the whole job
    accelerator: str
    per_accelerator: Figure  # samples/s each
    accelerator_memory_bytes: float | None  # each
    nvme_devices: int  # per node
    nvme_bytes: float  # per node, all its data drives together
    ram_bytes: float  # per node
    cores: int  # per node
    per_node: int = 8  # accelerators per node
    # one NVMe drive's read; None: the datasheet figure of its PCIe generation (servers.py)
    nvme_device_rate: Figure | None = None
    rates: MeasuredRates = field(default_factory=MeasuredRates)
    decoding: Decoding = "jpeg"  # "none": the workload reads its samples without decoding them
    decoding_said: str = "JPEG: decoded and augmented on the host or the GPU"
    cache_policy: str = "auto"  # iobench's shard caches: auto (as the tiers choose), lru or static
    access: str = "shuffled"
    batch: int = 256
    prefetch: int = 2
    decoded_sample_bytes: float = 1e6
    memory_cache_bytes: float | None = None  # default: half the RAM, less what the loader's buffers take
    dali_per_gpu: Figure | None = None  # default: measured by a sweep, else DALI_PER_GPU
    nic_bytes_per_s: float | None = None  # the node's storage network: caps a remote tier; None: not modelled
    target: str = ""  # how the node was described (given, a reference profile), for the report
    dataset_said: str = "given"  # where the dataset and sample sizes came from, for the report
    decode: DecodeRate = ASSUMED  # CPU decode + augment per core (analysis/decoderate.py)
    # host cores left to each accelerator's trainer process (accelerators/hostcost.py); None: none reserved
    trainer_cores: Figure | None = None
    vendor: str = "nvidia"  # the accelerators' vendor: DALI decodes on NVIDIA GPUs only
    read_cpu: ReadCpu | None = None  # the model's measured CPU per sample read without decoding
    mix: MixRule = field(default_factory=MixRule)  # how a cache and its backend share the reads
    units: Units = field(default_factory=Units)  # the user's: decimal unless they wrote binary

    @property
    def nodes(self) -> int:
        return math.ceil(self.accelerators / self.per_node)

    @property
    def node_accelerators(self) -> int:
        """Accelerators on one (full) node: the job's, up to the node's."""
        return min(self.accelerators, self.per_node)

    @property
    def reserved_cores(self) -> int:
        """Cores the node's trainers keep: none of the loader's work runs there."""
        return int(self.trainer_cores.value) * self.node_accelerators if self.trainer_cores else 0

    @property
    def loader_cores(self) -> int:
        """Cores left to the loader once the trainers have theirs (at least one: with fewer, every
        option is infeasible on cores)."""
        return max(1, self.cores - self.reserved_cores)

    @property
    def requirement(self) -> Requirement:
        """What one node's accelerators need."""
        return required(self.node_accelerators, self.per_accelerator.value, self.sample_bytes)

    @property
    def cluster_requirement(self) -> Requirement:
        return required(self.accelerators, self.per_accelerator.value, self.sample_bytes)

    @property
    def memory_cache(self) -> float:
        return self.memory_cache_bytes if self.memory_cache_bytes is not None else self.ram_bytes / 2
