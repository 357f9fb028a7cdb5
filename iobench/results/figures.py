"""What a measured cell's analysis produces, one record per fact: the contract between the step loop,
the analysis, the summary and every reader of it (report, compare, recommend).

Each figure is defined in docs/method.md. The analysis computes these records (iobench/analysis/);
nothing here computes anything. Records are frozen: a figure, once measured, is not patched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import get_args

from loaders.observe import LoaderCounters, Loss, StageStats

from .choices import AccountPart, Bound, CacheAchieved, CacheMode, CeilingPart, DifferentialPart, Reading
from .codec import from_json


@dataclass
class StepRow:
    """One step of the training loop (a row of steps.parquet). Mutable while the step log is open:
    the warm-up detected after the run re-marks ``warmup``."""

    step: int
    epoch: int
    warmup: bool
    t_start: float  # seconds since the loader was built
    wait_s: float
    h2d_s: float
    compute_s: float
    t_end: float
    samples: int
    bytes_read: int
    rank: int = 0  # the torch.distributed rank that ran the step (0 in a one-process cell)
    # synchronous multi-rank cells: after compute, blocked in the step's collective (waiting for
    # the slowest rank), then the modelled exposed all-reduce on the target fabric
    peer_wait_s: float = 0.0
    allreduce_s: float = 0.0
    # the device's time for the step: CUDA events' span (real model on a GPU), the step itself (on
    # CPU, where the host is the device), the modelled device time (emulated); docs/method.md
    # None in rows from before v6: the compute is then the device's time
    device_s: float | None = None
    # an emulated accelerator's device time drawn for the step (its compute distribution, v7+);
    # None for a real model, whose device_s is measured
    compute_draw_s: float | None = None
    trainer_cpu_s: float | None = None  # CPU of the trainer's process (all its threads) over the step
    # the loader worker (reader) that made the batch, and when it began and finished making it
    # (seconds since the loader was built; None where the backend does not stamp its batches):
    # what the at-scale model replays through the loader's queue (analysis/scale.py)
    reader: int = 0
    begun_s: float | None = None
    ready_s: float | None = None
    # what making the batch waited for its samples' bytes (its fetch stage), and where the reads are
    # made ahead of the pipeline (one object per sample, reads in flight) when each sample's read was
    # asked for and when its bytes were in (since the loader was built; None: read as it went)
    fetch_wait_s: float | None = None
    read_asked_s: Sequence[float] | None = None
    read_in_s: Sequence[float] | None = None
    # of wait_s, the part spent opening the epoch: the previous epoch's iterator shut down and this
    # one's built (worker start-up where workers do not persist); only an epoch's first step has it
    open_s: float = 0.0
    # the batch's readers' wall time in its other stages (fetch_wait_s is the fetch stage): what the
    # ledger splits a wait for a batch still being made by (analysis/ledger.py); None: not reported
    decode_s: float | None = None
    augment_s: float | None = None
    collate_s: float | None = None
    reader_cpu_s: float = 0.0  # the CPU its readers spent making the batch, every stage (thread CPU)
    # after the step, the training loop blocked for a checkpoint save (a checkpoint cell's; v9+)
    checkpoint_s: float = 0.0


# the parts of a step's account, in the order a step runs them (choices.AccountPart)
ACCOUNT_PARTS: tuple[AccountPart, ...] = get_args(AccountPart)
# of those, the data wait: the step blocked in next() on the loader
WAIT_PARTS = ("loader_start", "fetch", "decode", "augment", "collate", "unsplit", "handover")
# each part in words, wherever a split is shown (docs/method.md, The wall split)
PART_LABELS = {
    "device": "computing (the device busy)",
    "host": "the trainer's host beyond the device",
    "loader_start": "waiting: the loader opening an epoch",
    "fetch": "waiting: fetch",
    "decode": "waiting: decode",
    "augment": "waiting: augment",
    "collate": "waiting: collate",
    "unsplit": "waiting: the loader (no stage times)",
    "handover": "waiting: hand-over of a made batch",
    "peer_wait": "waiting for the slowest rank",
    "h2d": "host-to-device copy",
    "allreduce": "all-reduce",
    "loop": "the step loop's own bookkeeping",
    "checkpoint": "blocked saving a checkpoint",
}


@dataclass(frozen=True)
class StepAccount:
    """One step's account of the wall (analysis/ledger.py): the seconds from the end of its rank's
    previous step (a rank's first step: its own start) to its end, each in exactly one part, so the
    parts sum to ``end_s - start_s``. Every figure of a cell is derived from these."""

    rank: int
    epoch: int
    step: int
    warmup: bool
    start_s: float
    end_s: float
    samples: int
    bytes_read: int
    loop: float  # the step loop's own bookkeeping between steps and around the parts below
    loader_start: float  # waiting while the loader opened the epoch
    # waiting while the batch was still being made, split by its readers' time in each stage
    fetch: float
    decode: float
    augment: float
    collate: float
    unsplit: float  # ... where the loader reported no stage times
    handover: float  # waiting for a batch already made: IPC, unpickling, pinning
    peer_wait: float  # synchronous ranks: waiting for the slowest rank
    h2d: float
    device: float  # the device busy: the part of the step the accelerator computed
    host: float  # the trainer's host time beyond the device (its step's wall less the device busy)
    allreduce: float  # the modelled exposed all-reduce
    # not time parts: the trainer's process's CPU over the step (None: not measured), and the CPU
    # its batch's readers spent making it
    trainer_cpu_s: float | None = None
    reader_cpu_s: float = 0.0
    # its batch counts here: False where an interval clipped it before its end (a step delivers its
    # batch as it ends), its samples and bytes then 0
    delivered: bool = True
    checkpoint: float = 0.0  # blocked saving a checkpoint after the step (a time part, the last)

    @property
    def span_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def wait(self) -> float:
        return sum(getattr(self, p) for p in WAIT_PARTS)

    @property
    def compute(self) -> float:
        """The trainer's step: the device busy and its host's time beyond it."""
        return self.device + self.host


@dataclass(frozen=True)
class WallSplit:
    """Where a cell's wall went, as fractions of ``wall_s`` (every rank's, in a multi-rank cell)
    that sum to 1: one per part of ACCOUNT_PARTS (docs/method.md, The wall split)."""

    wall_s: float
    loop: float
    loader_start: float
    fetch: float
    decode: float
    augment: float
    collate: float
    unsplit: float
    handover: float
    peer_wait: float
    h2d: float
    device: float
    host: float
    allreduce: float
    checkpoint: float = 0.0  # v9+

    def parts(self) -> dict[str, float]:
        return {p: getattr(self, p) for p in ACCOUNT_PARTS}

    @property
    def wait(self) -> float:
        return sum(getattr(self, p) for p in WAIT_PARTS)


@dataclass(frozen=True)
class StepTimes:
    """The spread of the compute per step over a cell's measured steps (analysis/steptimes.py)."""

    basis: str  # "emulated draw" (compute_draw_s), else the AU basis of device_s
    steps: int  # every rank's measured steps
    mean_s: float
    cv: float  # sample sd / mean
    p50_s: float
    p99_s: float
    max_s: float


@dataclass(frozen=True)
class StepAlone:
    """The consumer's step timed alone after the step loop, the loader's workers gone."""

    step_s: float  # median host wall time of a step
    fastest_s: float  # the fastest step: on a shared host, the one closest to idle
    device_s: float | None  # median device span of a step (CUDA events); None where not a GPU
    cpu_s: float  # the trainer's process's CPU per step, mean (the CPU clock may tick in ms)
    steps: int
    cv: float | None = None  # sd / mean of the device spans (CUDA), else of the walls; None: < 2 steps
    # how far the median step can be trusted: its 95 % interval (order statistics, v9+)
    step_low_s: float | None = None
    step_high_s: float | None = None
    # the cores other processes used while it was timed (the host's busy CPU less this process's),
    # whether that left the trainer the host to itself (docs/method.md, The trainer alone), and how
    # many timings it took to find such a moment (v9+)
    others_cores: float | None = None
    quiet: bool | None = None
    attempts: int = 1
    # an emulated trainer's median step over the step its fixed work was sized to take on this host
    # (None for a real model): well above 1 with no other process busy, something the CPU counters
    # do not see slowed the cores (another machine's work on the same physical cores)
    slowed: float | None = None


# a cold window whose reads from the tier's devices are less than this share of what the loader
# read was served from a cache
COLD_READ_SHARE = 0.05


@dataclass(frozen=True)
class Window:
    """What a measured repeat measured after its warm-up, against ``run.min_measure``."""

    steps: int
    seconds: float
    epochs: int  # epochs the repeat ran, the requested ones and those the window added
    added_epochs: int  # run beyond run.epochs to reach the window
    samples_per_s_rel_ci: float | None  # half-width of the 95 % interval of samples/s over mean (batch means)
    met: bool  # at least run.min_measure's seconds and steps
    short_because: str | None = None  # why not: "run.max_steps" or "the epoch limit"
    au_rel_ci: float | None = None  # the same for AU (v8+)
    # a cold cell on a tier read from this host's block devices: what its processes read from them
    # over the window, as a share of what the loader read (v8+); below 5 %, the window was cached
    device_read_share: float | None = None

    @property
    def cached(self) -> bool:
        """A cold window served (almost) wholly from a cache (analysis/cellfigures.py)."""
        return self.device_read_share is not None and self.device_read_share < COLD_READ_SHARE


@dataclass(frozen=True)
class MlperfFigures:
    """A cell's figures laid out as MLPerf Storage reports them (DLIO's summary), beside its own."""

    accelerators: int  # per rank x ranks
    epoch_au: tuple[float, ...]  # DLIO's AU of each epoch
    au_mean: float  # their mean: what DLIO compares with the threshold
    au_stdev: float
    threshold: float | None  # the model's pass mark (configs/accelerators.yaml), None: none known
    passed: bool | None
    samples_per_s: float  # the measured window's, as the cell's own figure
    mib_per_s: float  # bytes really read over the window, MiB/s (DLIO: samples/s x a nominal record)
    # how the samples were read (analysis/mlperf.py, READING): "mlperf" (bytes read, not decoded,
    # MLPerf Storage's compute), "no decode" (the same for another compute), "decode" (decoded and
    # augmented, as training does; every summary before the mode existed)
    reading: Reading = "decode"


@dataclass(frozen=True)
class PipelineMetrics:
    steps: int  # measured steps (after warm-up)
    samples: int
    wall_s: float  # start of the first measured step -> end of the last
    samples_per_s: float
    bytes_read: int  # bytes the loader read from the tier during the measured steps
    bytes_per_s: float
    wait_s: float  # blocked in next() on the loader, the epochs' openings included
    h2d_s: float
    compute_s: float  # the trainer's steps: the device busy and its host's time beyond it
    au: float  # accelerator utilisation: device busy / wall, the one basis (docs/method.md)
    # DLIO's form over one rank's steps, warm-up included: device busy (2..n) / (end n - end 1)
    au_mlperf: float | None
    stall_fraction: float  # wait / wall
    wait_p50_ms: float
    wait_p95_ms: float
    wait_p99_ms: float
    wait_max_ms: float
    time_to_first_batch_s: float | None
    # mean wait of the first step of each epoch after the first: the epoch boundary's cost, to set
    # against wait_p50_ms; None with one epoch
    epoch_boundary_wait_ms: float | None = None
    # the trainer's host (docs/method.md, The trainer's host): the device's busy time over the
    # measured steps, which AU is taken from; the step timed alone; the median step in the cell
    # over it; the trainer's own CPU per step (its process's, less the loader's readers that ran in
    # it); the cores the loader's readers and the trainer used (counted once, cores_used)
    device_busy_s: float | None = None
    au_basis: str | None = None  # how the device busy was measured (see method.md)
    step_alone_s: float | None = None
    trainer_slowdown: float | None = None
    trainer_cpu_ms_per_step: float | None = None
    loader_cores: float | None = None
    trainer_cores: float | None = None
    # what the trainer alone takes: its batch over its median step alone (v9+; v8: its fastest step);
    # below the demand, the trainer cannot reach the demand whatever feeds it; with the 95 % interval
    # of that rate, whether the host was quiet while it was timed, and the cores others used then
    trainer_alone_samples_per_s: float | None = None
    trainer_alone_low: float | None = None
    trainer_alone_high: float | None = None
    trainer_alone_quiet: bool | None = None
    trainer_alone_others_cores: float | None = None
    trainer_alone_slowed: float | None = None

    @property
    def cores_used(self) -> float | None:
        """The cores the cell's readers and trainer used together over the measured steps."""
        if self.loader_cores is None or self.trainer_cores is None:
            return None
        return self.loader_cores + self.trainer_cores


# the usable cores' share at or above which a window's cores were spent: the trainer, the readers,
# iobench's own processes and everything else on the host filled them (docs/method.md, The core budget)
CORES_SPENT = 0.90


@dataclass(frozen=True)
class CoreBudget:
    """Where a measured window's usable cores went, each figure in cores (CPU seconds over the
    window's seconds): docs/method.md, The core budget."""

    usable: int
    trainer: float  # the trainer's process(es), the loader's readers that ran in them excluded
    readers: float  # the loader's readers: its worker processes, or its threads in the trainer's
    own: float  # iobench's own processes: the sweep (or the probe) and its telemetry
    others: float  # everything else on the host: its busy CPU less all of the above
    steal: float | None = None  # what the hypervisor took from the host's cores, where reported

    @property
    def used(self) -> float:
        return self.trainer + self.readers + self.own + self.others

    @property
    def spent(self) -> bool:
        return self.used >= CORES_SPENT * self.usable


@dataclass(frozen=True)
class CoresNeeded:
    """The cores one accelerator takes to be fed (docs/method.md, Cores per accelerator): computed
    once, by the judge, and shown unchanged wherever it is shown."""

    samples_per_s: float  # the rate fed
    fed: str  # what that rate is: "the demand", "what the trainer alone takes", ...
    loader_cpu_ms_per_sample: float  # the readers' CPU per sample, every stage and their overhead
    trainer_cpu_ms_per_sample: float  # the trainer's own CPU per sample
    loader: float  # cores
    trainer: float

    @property
    def per_accelerator(self) -> float:
        return self.loader + self.trainer


@dataclass(frozen=True)
class StageEvidence:
    stage: str
    wall_ms_per_sample: float
    cpu_ms_per_sample: float
    share: float  # of the reader's per-sample wall time
    capacity_samples_per_s: float  # readers / wall time per sample in this stage alone


@dataclass(frozen=True)
class Verdict:
    bound: Bound
    binding_stage: str | None
    headline: str
    evidence: tuple[str, ...] = ()
    stages: tuple[StageEvidence, ...] = ()
    pipeline_capacity_samples_per_s: float | None = None
    cpu_capacity_samples_per_s: float | None = None
    demand_samples_per_s: float | None = None
    # what to do about it, in one sentence (v8+); the evidence argues it, strongest first
    action: str | None = None
    # where the window's cores went, and the cores an accelerator takes to be fed (v9+)
    budget: CoreBudget | None = None
    cores: CoresNeeded | None = None

    @property
    def name(self) -> str:
        """``prep-bound (decode)``: the bound and, where there is one, the binding stage."""
        return f"{self.bound}-bound" + (f" ({self.binding_stage})" if self.binding_stage else "")


@dataclass(frozen=True)
class SteadyState:
    warmup_steps: int  # leading steps to discard
    method: str  # e.g. "MSER, 5-step grid" or "MSER-5", for reports
    n_steps: int  # steps in the series
    steady_steps: int  # n_steps - warmup_steps
    steady_mean_s: float  # mean duration of the kept steps
    steady_stdev_s: float | None  # sample stdev of the kept steps; None with fewer than 2
    warmup_mean_s: float | None  # mean duration of the discarded steps; None when none discarded
    search_limit_steps: int  # largest truncation MSER was allowed to choose
    at_limit: bool  # MSER's minimum at or past the search limit: warm-up may outlast the series
    notice: str | None  # why the answer deserves a second look, or None


@dataclass(frozen=True)
class RepeatSummary:
    n: int
    mean: float
    median: float
    stdev: float | None  # sample stdev (n - 1); None for one run
    ci_low: float | None  # Student-t interval of the mean; None for one run
    ci_high: float | None
    confidence: float
    t_quantile: float | None  # t_{(1+confidence)/2, n-1}; None for one run
    spread: float  # (max - min) / |median|
    unstable_spread: float  # threshold the spread was judged against
    unstable: bool  # spread > unstable_spread: the runs disagree
    notice: str | None  # e.g. ONE_RUN_NOTICE


@dataclass(frozen=True)
class CacheState:
    """What a measured repeat found about caching before it started (the tier made it)."""

    requested: CacheMode
    method: str  # e.g. "posix_fadvise(DONTNEED)", "read-through", "none"
    resident_bytes_before: int | None
    total_bytes: int
    resident_fraction_before: float | None
    achieved: CacheAchieved
    note: str


@dataclass(frozen=True)
class Ceiling:
    name: CeilingPart
    samples_per_s: float
    samples: int
    seconds: float
    bytes_per_s: float | None = None
    method: str = ""
    note: str = ""


@dataclass(frozen=True)
class Ceilings:
    """The ceilings a diagnosed cell or a probed job measured, each None where it was not: a cell
    measures all three, a probed job the step alone (accelerator) and its loader alone (prep or
    fetch, by where its readers spent their time). Written as the mapping of part to ceiling that
    summaries have always held (a part not measured: null), so those on disk read back unchanged."""

    accelerator: Ceiling | None = None
    prep: Ceiling | None = None
    fetch: Ceiling | None = None

    @property
    def measured(self) -> tuple[Ceiling, ...]:
        return tuple(c for c in (self.accelerator, self.prep, self.fetch) if c is not None)

    @property
    def loader(self) -> Ceiling | None:
        """The input side's ceiling: the lower of prep and fetch where both were measured."""
        inputs = [c for c in (self.prep, self.fetch) if c is not None]
        return min(inputs, key=lambda c: c.samples_per_s) if inputs else None

    def rates(self) -> dict[str, float]:
        """Samples/s of each part measured alone, by its name: the differential's input
        (analysis/differential.py), which adds the cores' own beside them."""
        return {c.name: c.samples_per_s for c in self.measured}


@dataclass(frozen=True)
class CapacityCheck:
    count: int
    au: float
    samples_per_s: float


@dataclass(frozen=True)
class Capacity:
    """How many emulated accelerators the input pipeline keeps at >= 90 % AU, and the runs that checked it."""

    max_accelerators: int
    input_ceiling_samples_per_s: float
    demand_per_accelerator: float
    predicted_au_at_max: float | None
    predicted_au_at_max_plus_one: float
    accelerator: str | None = None
    model: str | None = None
    demand: str | None = None
    checks: tuple[CapacityCheck, ...] = ()
    confirmed: bool | None = None
    # what each accelerator's trainer takes alone (v8+): below demand x 0.9 no count reaches the target
    trainer_takes_per_accelerator: float | None = None


@dataclass(frozen=True)
class Attribution:
    binding: DifferentialPart  # the part with the lowest ceiling
    ceilings: dict[str, float]  # samples/s of each part alone
    headroom: dict[str, float]  # each part's ceiling over the binding one (1.0 for the binding)
    predicted_samples_per_s: float  # min of the ceilings
    measured_samples_per_s: float
    prediction_error: float  # predicted / measured - 1 (v8+; before: measured / predicted - 1)
    online_bound: Bound
    agree: bool
    au: float
    statement: str
    capacity: Capacity | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Latency:
    """Percentiles of request latency in ms; empty when there were no requests."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    n: int = 0


@dataclass(frozen=True)
class LoaderStats:
    """The loader's own counters over a span of batches (loaders.StageStats, as recorded)."""

    samples: int = 0
    bytes_read: int = 0
    wall_s: dict[str, float] = field(default_factory=dict)  # per stage
    cpu_s: dict[str, float] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # skipped samples by kind
    error_examples: tuple[str, ...] = ()
    counters: LoaderCounters = field(default_factory=LoaderCounters)  # requests, cache, losses, ...
    request_latency_ms: Latency = field(default_factory=Latency)
    notes: tuple[str, ...] = ()  # what the loader said once (a cache read around, an entry refetched)
    losses: tuple[Loss, ...] = ()  # the regions of shards its readers skipped as damaged


def loader_stats(stats: StageStats) -> LoaderStats:
    """The loader's StageStats as the summary records them."""
    return from_json(LoaderStats, stats.as_dict())


@dataclass(frozen=True)
class EpochFigures:
    """One epoch of a measured repeat, warm-up steps included (an epoch is what a cache fills over)."""

    epoch: int
    steps: int
    samples: int
    wall_s: float
    samples_per_s: float
    bytes_read: int
    bytes_per_s: float
    stall_fraction: float
    cache_hits: int
    cache_misses: int
    cache_hit_ratio: float | None
    cache_evictions: int
    bytes_transferred: int
    requests: int
    retries: int
    request_latency_ms: Latency = field(default_factory=Latency)
    au: float | None = None  # device busy ÷ wall over the epoch, warm-up included (v8+; v5-7: Σ compute)
    au_mlperf: float | None = None  # DLIO's AU of the epoch (device busy), ranks weighted by steps (v5+)
    # the part of the epoch inside the measured window: its seconds (per rank) and its AU; weighted
    # by window_s the epochs' window_au give the cell's AU (v8+)
    window_s: float = 0.0
    window_au: float | None = None
    # the samples the epoch's plan delivers (the loader's count, loaders/epochtally.py); None: not
    # known (remote shards without counts, DALI's own readers) or recorded before the count existed
    expected_samples: int | None = None


@dataclass(frozen=True)
class SampleLoss:
    """What the cell's completed epochs did not deliver against their plans (analysis/losses.py):
    the samples lost over them, the epoch that lost most, where (the regions readers skipped, the
    samples skipped by kind), and the cache entries found damaged and fetched again (no loss)."""

    lost: int
    expected: int
    epoch: int  # the epoch that lost most
    epoch_delivered: int
    epoch_expected: int
    where: tuple[Loss, ...] = ()
    skipped: dict[str, int] = field(default_factory=dict)  # samples skipped as corrupt, by kind
    cache_damaged: int = 0


@dataclass(frozen=True)
class RankFigures:
    """One rank of a multi-rank cell over the interval every rank measured."""

    rank: int
    local_rank: int
    node_rank: int
    host: str
    steps: int
    samples: int
    bytes_read: int
    samples_per_s: float
    bytes_per_s: float
    wait_s: float
    compute_s: float
    au: float
    stall_fraction: float
    wait_p99_ms: float | None
    warmup_steps: int
    verdict: str
    binding_stage: str | None
    cache: str | None
    peer_wait_s: float = 0.0  # synchronous cells: waiting for the slowest rank
    allreduce_s: float = 0.0  # synchronous cells: the modelled exposed all-reduce
    free_running_au: float | None = None  # compute / (wall - peer wait): its AU without peers to wait for


@dataclass(frozen=True)
class Interval:
    start_s: float
    end_s: float
    wall_s: float


@dataclass(frozen=True)
class Distributed:
    """A multi-rank cell's job-level figures."""

    world_size: int
    nodes: int
    ranks_per_node: int
    hosts: tuple[str, ...]
    interval: Interval
    alignment_s: float
    samples_per_s: float
    bytes_per_s: float
    skew: float | None
    slowest_rank: int
    slowest_host: str
    slowest_samples_per_s: float
    # how the ranks kept step (docs/method.md, Synchronous training); "none": free-running, as v3
    sync: str = "none"
    steps: int = 0  # steps every rank completed in the interval
    data_wait_fraction: float = 0.0  # the ranks' mean share of the interval waiting for their batch
    peer_wait_fraction: float = 0.0  # ... waiting for the slowest rank
    allreduce_fraction: float = 0.0  # ... in the modelled exposed all-reduce
    free_running_au: float | None = None  # the ranks' mean AU without their peer waits
    straggler_cost: float | None = None  # free_running_au - the job's AU: what waiting for peers cost
    interconnect: str | None = None
    allreduce_ms: float | None = None  # the modelled ring all-reduce at this world size, whole
    dropped_batches: int = 0  # batches unused because a peer's epoch ran out first


@dataclass(frozen=True)
class ScalePoint:
    """The job predicted at ``world_size`` synchronous ranks from one cell's measured steps."""

    world_size: int
    au: float
    samples_per_s: float  # the job's: world_size x batch / step time
    step_s: float
    data_wait_s: float  # the slowest of world_size ranks' waits, per step (mean)
    allreduce_s: float  # the exposed all-reduce modelled at this world size
    au_low: float  # 2.5th and 97.5th percentiles over the bootstrap replicates
    au_high: float
    # more ranks than measured steps: the slowest of W draws cannot exceed the largest wait measured,
    # so the predicted wait is a lower bound and AU an upper bound (measure more steps)
    beyond_measured_tail: bool = False
