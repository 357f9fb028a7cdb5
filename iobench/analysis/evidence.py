"""What the judge argues from (analysis/verdict.py): one record that sweep cells, multi-rank jobs and
probed jobs all fill, so one rule list judges them all.

- the window's metrics (its ledger's: AU, waits, the trainer in the run and alone);
- what the loader's readers did per sample: each stage's wall and CPU, from which the time blocked
  on storage, the CPU of the work, the time waiting for a core and collate follow; their share of
  the window spent making batches;
- the ledger's split, where the hand-over and the epoch's opening are measured;
- the core budget of the window and the demand;
- the object client the tier reads through; a synchronous job's waits for its peers; the window's
  length against what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from iobench.results.figures import (
    Ceilings,
    CoreBudget,
    PipelineMetrics,
    SampleLoss,
    StageEvidence,
    WallSplit,
    Window,
)
from iobench.results.spec import MinMeasure
from loaders.observe import STAGES, LoaderCounters, StageStats
from loaders.storage import CLIENTS, ResolvedClient

CPU_STAGES = ("decode", "augment", "collate")


@dataclass(frozen=True)
class ClientFacts:
    """The object client a cell's tier reads through: its registry entry's name and version, and
    what its class says it retries by itself."""

    name: ResolvedClient
    version: str
    # what it retries by itself that the reader cannot turn off (clients/base.py: own_retries);
    # None: it makes no retries of its own
    own_retries: str | None = None


def client_facts(name: ResolvedClient | None) -> ClientFacts | None:
    """The object client a tier reads through (``Tier.object_client``), from its registry entry
    and class, or None for a tier that reads through none (a file system, librados)."""
    if name is None:
        return None
    entry = CLIENTS.entry(name)
    return ClientFacts(name, entry.version(), entry.load().own_retries)


def stage_evidence(stats: StageStats, readers: int) -> tuple[StageEvidence, ...]:
    """Each stage's per-sample wall and CPU time in the readers, its share, and its rate alone."""
    wall_ms, cpu_ms = stats.per_sample_ms("wall"), stats.per_sample_ms("cpu")
    total = sum(wall_ms.values())
    return tuple(
        StageEvidence(
            stage=s,
            wall_ms_per_sample=wall_ms[s],
            cpu_ms_per_sample=cpu_ms[s],
            share=wall_ms[s] / total if total > 0 else 0.0,
            capacity_samples_per_s=1000.0 * readers / wall_ms[s] if wall_ms[s] > 0 else float("inf"),
        )
        for s in STAGES
    )


@dataclass(frozen=True)
class ReaderWork:
    """Per sample, what the loader's readers (its workers, or the loop's own process without them)
    spent in each stage. A stage's wall beyond its CPU is, in fetch, time blocked on storage, and in
    the CPU stages (decode, augment, collate), time runnable but waiting for a core."""

    readers: int
    workers: int  # 0: the readers ran in the trainer's process
    stages: tuple[StageEvidence, ...]
    busy: float | None = None  # the readers' share of the window spent making batches
    bytes_per_sample: float | None = None
    # what a stage is called where its source measures it otherwise (the probe times the dataset's
    # __getitem__ whole: decode and augment together)
    words: Mapping[str, str] = field(default_factory=dict)

    def stage(self, name: str) -> StageEvidence:
        return next(s for s in self.stages if s.stage == name)

    def named(self, stage: str) -> str:
        return self.words.get(stage, "JPEG decode" if stage == "decode" else stage)

    @property
    def wall_ms(self) -> float:
        return sum(s.wall_ms_per_sample for s in self.stages)

    @property
    def cpu_ms(self) -> float:
        """The CPU of every stage per sample."""
        return sum(s.cpu_ms_per_sample for s in self.stages)

    @property
    def blocked_ms(self) -> float:
        fetch = self.stage("fetch")
        return max(0.0, fetch.wall_ms_per_sample - fetch.cpu_ms_per_sample)

    @property
    def runq_ms(self) -> float:
        return sum(
            max(0.0, self.stage(s).wall_ms_per_sample - self.stage(s).cpu_ms_per_sample) for s in CPU_STAGES
        )

    @property
    def capacity(self) -> float | None:
        """Samples/s the readers make when they never wait to be asked."""
        return 1000.0 * self.readers / self.wall_ms if self.wall_ms > 0 else None


def reader_work(
    stats: StageStats,
    *,
    readers: int,
    workers: int,
    wall_s: float | None = None,
    busy: float | None = None,
    words: Mapping[str, str] | None = None,
) -> ReaderWork:
    """The readers' work from a loader's stage counters over a window of ``wall_s`` seconds (their busy
    share: their stage time over the readers' time in it, unless ``busy`` is known)."""
    stages = stage_evidence(stats, readers)
    in_stages = sum(stats.wall_s.get(s, 0.0) for s in STAGES)
    return ReaderWork(
        readers=readers,
        workers=workers,
        stages=stages,
        busy=busy if busy is not None else in_stages / (readers * wall_s) if wall_s else None,
        bytes_per_sample=stats.bytes_read / stats.samples if stats.samples else None,
        words=words or {},
    )


@dataclass(frozen=True)
class SyncFacts:
    """A synchronous job's waits, as shares of the interval every rank measured."""

    data_wait: float
    peer_wait: float
    allreduce: float
    straggler_cost: float | None  # AU lost to waiting for peers
    slowest: str  # which rank the others waited for, and why
    fabric: str


@dataclass(frozen=True)
class Evidence:
    """Everything the judge argues from, for one window (one rank's, or a job's)."""

    metrics: PipelineMetrics
    work: ReaderWork | None  # None: the readers were not seen (``unseen`` says why)
    cores: int  # usable in the window (every rank's)
    demand: float | None = None  # samples/s every accelerator of the window demands; None: not known
    accelerators: int = 1  # the accelerators the window fed (every rank's)
    trainers: int = 1  # the trainers that fed them: one per rank
    split: WallSplit | None = None  # where the hand-over and the epoch's opening are measured
    budget: CoreBudget | None = None
    # the rate one accelerator takes where no demand is known (a probed job's step alone), and what
    # it is
    feed: tuple[float, str] | None = None
    client: ClientFacts | None = None
    counters: LoaderCounters = field(default_factory=LoaderCounters)  # the loader's request counters
    window: Window | None = None
    least: MinMeasure | None = None  # what the window was asked to be
    sync: SyncFacts | None = None
    ranks: tuple[str, ...] = ()  # one line per rank of a multi-rank job
    ceilings: Ceilings | None = None  # a probed job's step alone and loader alone
    unseen: str | None = None  # why the readers were not seen
    unseen_action: str = "run with a backend that reports stage times"
    pin_ms_per_batch: float | None = None
    loss: SampleLoss | None = None  # samples the completed epochs did not deliver (losses.py): said first
