"""Where the pipeline starves the accelerator, in plain words with the evidence.

Online attribution: each loader reader (a worker process, or the main process when there are
none) runs fetch -> decode -> augment -> collate serially, so its rate is 1 / (sum of the
per-sample stage times) and the pipeline's is readers / sum, capped by the CPU cores. The stage
with the largest share of that sum binds. A pipeline that keeps the accelerator >= 90 % busy
(MLPerf Storage's rule) is not the bottleneck at all.

Before either: the trainer needs the host too. When its step in the cell is much slower than the
same step alone while its data was there (it seldom waited for a batch), the trainer's own step set
the pace and the host slowed it: the cell is host-bound, whatever its AU says.

Within fetch: a tier read through an object client (loaders/storage/clients/) may be bound by the
client's own CPU rather than by the store; when the client's CPU takes a quarter of the readers'
time or more, the verdict names the client and another one to try (docs/method.md, Storage requests
and caches).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from iobench.analysis.cores import cores_to_feed
from iobench.results.figures import PipelineMetrics, StageEvidence, Verdict
from loaders.observe import STAGES, StageStats

AU_TARGET = 0.90
# the trainer's median step in the cell over its step alone above which a stretched step can be
# called host-bound (docs/method.md, The trainer's host)
HOST_SLOWDOWN = 1.5
# ... and the stall fraction at or below which the data was there: the trainer's step set the pace
HOST_STALL = 0.10
PREP_STAGES = ("decode", "augment", "collate")
# the client's CPU over the readers' time at or above which a fetch-bound cell is bound by its
# object client, not the store: between minio's 0.19 and s3fs's 0.32 measured on the same objects
# (docs/method.md, Storage requests and caches)
CLIENT_BOUND = 0.25
GIB = 2**30


@dataclass(frozen=True)
class ClientFacts:
    """The object client a cell's tier reads through, as the tier's description records it."""

    name: str
    version: str
    # what it retries by itself that the reader cannot turn off (clients/base.py: own_retries);
    # None: it makes no retries of its own
    own_retries: str | None = None


def client_facts(tier_description: Mapping[str, Any]) -> ClientFacts | None:
    """The object client of a tier from its description (tiers/s3.py: ``client``,
    ``client_version``, ``client_own_retries``), or None for a tier that reads through none (a
    CephFS tier's ``client`` is its mount, ceph-fuse or the kernel's, with no version of its own)."""
    name = tier_description.get("client")
    if name is None or "client_version" not in tier_description:
        return None
    own = tier_description.get("client_own_retries") or ""
    return ClientFacts(name, tier_description["client_version"], None if own.startswith("none") else own)


def _fmt_rate(x: float) -> str:
    return f"{x:,.0f}/s"


def stage_evidence(stats: StageStats, readers: int) -> list[StageEvidence]:
    """Each stage's per-sample wall and CPU time in the readers, its share, and its rate alone."""
    wall_ms, cpu_ms = stats.per_sample_ms("wall"), stats.per_sample_ms("cpu")
    total = sum(wall_ms.values())
    return [
        StageEvidence(
            stage=s,
            wall_ms_per_sample=wall_ms[s],
            cpu_ms_per_sample=cpu_ms[s],
            share=wall_ms[s] / total if total > 0 else 0.0,
            capacity_samples_per_s=1000.0 * readers / wall_ms[s] if wall_ms[s] > 0 else float("inf"),
        )
        for s in STAGES
    ]


def attribute(
    metrics: PipelineMetrics,
    stats: StageStats,
    *,
    workers: int,
    cores: int,
    demand_samples_per_s: float | None,
    trainer_cores: int | None = None,
    client: ClientFacts | None = None,
) -> Verdict:
    """The verdict of one measured run: the first rule that holds, in order (the trainer's host
    starved, the trainer short of its demand with the data keeping up, the accelerator busy enough,
    no stage times, fetch (by the object ``client`` or the store), prep), with its evidence
    strongest first."""
    readers = max(1, workers)
    case = _Case(
        metrics, stage_evidence(stats, readers), readers, cores, demand_samples_per_s, client, stats.counters
    )
    return (
        case.starved_host()
        or case.short_trainer()
        or case.busy_accelerator()
        or case.no_stage_times()
        or case.fetch()
        or case.prep(trainer_cores)
    )


class _Case:
    """What a verdict argues from: the metrics, the stages, and the evidence in the order it argues
    (what was measured, where a sample's time goes, what it is not), then its context."""

    def __init__(
        self,
        metrics: PipelineMetrics,
        stages: list[StageEvidence],
        readers: int,
        cores: int,
        demand: float | None,
        client: ClientFacts | None,
        counters: Counter,
    ) -> None:
        self.metrics, self.stages, self.readers, self.cores, self.demand = (
            metrics,
            stages,
            readers,
            cores,
            demand,
        )
        self.total_wall = sum(s.wall_ms_per_sample for s in stages)
        self.total_cpu = sum(s.cpu_ms_per_sample for s in stages)
        self.pipeline_cap = 1000.0 * readers / self.total_wall if self.total_wall > 0 else None
        self.cpu_cap = 1000.0 * cores / self.total_cpu if self.total_cpu > 0 else None
        self.short = trainer_short_of_demand(metrics, demand)
        self.evidence: list[str] = [self.short] if self.short else []
        self.evidence.append(
            f"measured {_fmt_rate(metrics.samples_per_s)} at AU {metrics.au:.2f}; the accelerator waited "
            f"{100 * metrics.stall_fraction:.0f} % of the time (wait p50 {metrics.wait_p50_ms:.1f} ms, "
            f"p99 {metrics.wait_p99_ms:.1f} ms)"
        )
        if self.total_wall > 0:
            parts = ", ".join(
                f"{s.stage} {s.wall_ms_per_sample:.2f} ms ({100 * s.share:.0f} %)" for s in stages
            )
            self.evidence.append(
                f"per sample, each of {readers} reader(s) spends {self.total_wall:.2f} ms: {parts}"
            )
        self.context: list[str] = []
        if self.pipeline_cap:
            self.context.append(
                f"so the readers can deliver about {_fmt_rate(self.pipeline_cap)}"
                + (
                    f"; the {cores} CPU core(s) cap CPU work at {_fmt_rate(self.cpu_cap)}"
                    if self.cpu_cap
                    else ""
                )
            )
        if demand and not self.short:
            self.context.append(f"the accelerator demands {_fmt_rate(demand)}")
        self.client = client
        self.client_share = self.read_through(client, counters) if client else None

    def read_through(self, client: ClientFacts, c: Counter) -> float | None:
        """The object client's cost per request and per GiB, said as evidence; its share of the
        readers' time (client_cpu_s / (readers x wall)) for the fetch rule, None without requests."""
        requests, cpu_s, nbytes = c["requests"], c["client_cpu_s"], c["bytes_transferred"]
        said = f"client: {client.name} {client.version}: "
        if not requests:
            self.evidence.append(said + "made no requests over the measured steps")
            return None
        per_gib = f", {cpu_s / (nbytes / GIB):.1f} CPU-s per GiB" if nbytes else ""
        # a client that makes retries of its own reports none, or (s3torchconnector) those behind
        # a fault it passed on, counted as client_retries
        reported = c["client_retries"]
        own = (
            "0 (turned off)"
            if client.own_retries is None
            else f"{reported} counted ({client.own_retries})"
            if reported
            else f"not counted ({client.own_retries})"
        )
        self.evidence.append(
            said + f"{1000 * cpu_s / requests:.2f} ms of CPU per request{per_gib}; its own retries: {own}"
        )
        return cpu_s / (self.readers * self.metrics.wall_s) if self.metrics.wall_s > 0 else None

    def verdict(self, bound: str, headline: str, action: str, binding_stage: str | None = None) -> Verdict:
        return Verdict(
            bound=bound,
            binding_stage=binding_stage,
            headline=headline,
            evidence=(*self.evidence, *self.context),
            stages=tuple(self.stages),
            pipeline_capacity_samples_per_s=self.pipeline_cap,
            cpu_capacity_samples_per_s=self.cpu_cap,
            demand_samples_per_s=self.demand,
            action=action,
        )

    def after_short(self, headline: str) -> str:
        """A headline, after the trainer's shortfall where there is one."""
        return f"{self.short}; and {headline}" if self.short else headline

    def starved_host(self) -> Verdict | None:
        host = host_bound(self.metrics, self.cores)
        if host is None:
            return None
        self.evidence[:0] = host
        return self.verdict(
            "host",
            f"host-bound (the trainer starved of CPU): its step took {self.metrics.trainer_slowdown:.1f}x as long "
            "in the cell as alone, while the loader's workers held the cores",
            "fewer loader workers, or decode off the CPU (DALI mixed): the trainer needs its cores back",
        )

    def short_trainer(self) -> Verdict | None:
        if not self.short or self.metrics.stall_fraction > HOST_STALL:
            return None
        return self.verdict(
            "host",
            "host-bound (the trainer's own step): " + self.short + "; the data kept up with it",
            "the trainer, not the data: a larger batch per accelerator spreads its host work over more samples; "
            "if its host work is the documented default, `iobench calibrate --model <model>` measures yours",
            "trainer",
        )

    def busy_accelerator(self) -> Verdict | None:
        if self.metrics.au < AU_TARGET:
            return None
        headroom = self.pipeline_cap / self.demand if self.pipeline_cap and self.demand else None
        return self.verdict(
            "accelerator",
            f"accelerator-bound: the input pipeline keeps the accelerator {100 * self.metrics.au:.0f} % busy",
            "nothing on the input side"
            + (f": the readers could deliver {headroom:.1f}x the demand" if headroom else ""),
        )

    def no_stage_times(self) -> Verdict | None:
        if self.total_wall > 0:
            return None
        return self.verdict(
            "unknown",
            "unknown: the loader reported no stage times",
            "run with a backend that reports stage times",
        )

    def fetch(self) -> Verdict | None:
        binding = max(self.stages, key=lambda s: s.wall_ms_per_sample)
        if binding.stage != "fetch":
            return None
        io_wait = binding.wall_ms_per_sample - binding.cpu_ms_per_sample
        self.evidence.append(
            f"fetch is {binding.wall_ms_per_sample:.2f} ms per sample of which {max(0.0, io_wait):.2f} ms "
            "waiting on storage, not CPU"
        )
        reading = f"reading takes {100 * binding.share:.0f} % of each reader's time per sample"
        if self.client and self.client_share is not None:
            by_client = self.client_share >= CLIENT_BOUND
            self.evidence.append(
                f"{self.client.name}'s own CPU took {100 * self.client_share:.0f} % of the readers' time "
                f"({'at or above' if by_client else 'below'} the {100 * CLIENT_BOUND:.0f} % at which the "
                "client, not the store, binds)"
            )
            if by_client:
                return self.verdict(
                    "fetch",
                    self.after_short(
                        f"fetch-bound by the client ({self.client.name}), not the store: its CPU takes "
                        f"{100 * self.client_share:.0f} % of the readers' time; {reading}"
                    ),
                    other_client(self.client.name),
                    binding.stage,
                )
        return self.verdict(
            "fetch",
            self.after_short(f"fetch-bound (storage): {reading}"),
            "a faster tier or a cache in front of it, or more reads in flight (more workers, a higher "
            "read concurrency)",
            binding.stage,
        )

    def prep(self, trainer_cores: int | None) -> Verdict:
        binding = max(self.stages, key=lambda s: s.wall_ms_per_sample)
        prep_share = sum(s.share for s in self.stages if s.stage in PREP_STAGES)
        what = "JPEG decode" if binding.stage == "decode" else binding.stage
        fetch = next(s for s in self.stages if s.stage == "fetch")
        self.evidence.append(
            f"fetch is only {fetch.wall_ms_per_sample:.2f} ms per sample "
            f"(alone it could feed {_fmt_rate(fetch.capacity_samples_per_s)}): storage is not the limit"
        )
        # what feeding the trainer takes: its demand, or less where the trainer alone cannot reach it
        takes = trainer_takes(self.metrics, self.demand)
        action = "more CPU cores for the loader, or decode on the GPU (DALI mixed)"
        if takes and self.total_cpu > 0:
            whom = "the trainer can take" if takes < (self.demand or 0) else "demanded"
            keeps = (
                trainer_cores if trainer_cores is not None else math.ceil(self.metrics.trainer_cores or 0.0)
            )
            loader = cores_to_feed(takes, self.total_cpu)
            action = (
                f"feeding the {_fmt_rate(takes)} {whom} needs about {loader:.0f} cores of loader CPU at the "
                f"measured {self.total_cpu:.2f} CPU-ms per sample (every stage), and {keeps} for the trainer: "
                f"{loader + keeps:.0f} per accelerator (the cell had {self.cores}); or decode on the GPU (DALI mixed)"
            )
        headline = (
            f"prep-bound (CPU {what}): decode+augment+collate take {100 * prep_share:.0f} % of each "
            f"reader's time, {binding.stage} alone {100 * binding.share:.0f} %"
        )
        return self.verdict("prep", self.after_short(headline), action, binding.stage)


def other_client(name: str) -> str:
    """What to read with instead of client ``name`` when its CPU binds."""
    if name == "obstore":
        return (
            "obstore already costs the least CPU per request measured: more readers (workers) to spread "
            "its CPU over more cores, or a cache in front of the store (docs/tiers.md, Object clients)"
        )
    minio = "" if name == "minio" else ", or minio where the DataLoader's workers must be forked"
    return (
        "another object client (the tier's `client:`): obstore, the least CPU per request measured, with "
        f"the loader's workers started by forkserver or spawn (it does not survive a fork){minio}; "
        "docs/tiers.md, Object clients"
    )


def trainer_takes(metrics: PipelineMetrics, demand: float | None) -> float | None:
    """The samples/s the trainer can take: its demand, or what it steps at alone where it falls short
    of it (an emulated trainer whose host work outlasts its device time; a real one that cannot keep up)."""
    alone = metrics.trainer_alone_samples_per_s
    if demand and alone and trainer_short_of_demand(metrics, demand):
        return alone
    return demand or None


def trainer_short_of_demand(metrics: PipelineMetrics, demand: float | None) -> str | None:
    """The finding that the trainer alone cannot reach its demand (it steps slower than AU_TARGET
    of it with the data in memory), or None."""
    alone = metrics.trainer_alone_samples_per_s
    if not demand or not alone or alone >= AU_TARGET * demand:
        return None
    return (
        f"the trainer alone steps at {_fmt_rate(alone)} of the {_fmt_rate(demand)} demanded, so its AU "
        f"cannot pass {min(1.0, alone / demand):.2f} whatever feeds it: host-bound before any data"
    )


def host_bound(metrics: PipelineMetrics, cores: int) -> list[str] | None:
    """The evidence that the trainer's own step, slowed by the host, set the pace (its slowdown at
    least ``HOST_SLOWDOWN``, its data waits at most ``HOST_STALL`` of the wall and less than the
    stretch), or None."""
    slowdown, alone = metrics.trainer_slowdown, metrics.step_alone_s
    if slowdown is None or alone is None or metrics.wall_s <= 0 or slowdown < HOST_SLOWDOWN:
        return None
    stretch = max(0.0, metrics.compute_s - metrics.steps * alone) / metrics.wall_s
    if metrics.stall_fraction > HOST_STALL or stretch <= metrics.stall_fraction:
        return None
    ev = [
        f"the trainer's step took {1000 * alone * slowdown:.1f} ms (median) in the cell against "
        f"{1000 * alone:.1f} ms alone: {slowdown:.2f}x; the stretch is {100 * stretch:.0f} % of the wall, "
        f"waiting for data {100 * metrics.stall_fraction:.0f} %"
    ]
    if metrics.trainer_cpu_ms_per_step is not None:
        ev.append(f"the trainer used {metrics.trainer_cpu_ms_per_step:.1f} CPU-ms per step of its own")
    trainer_cores = metrics.trainer_cores
    if metrics.loader_cores is not None and trainer_cores is not None:
        used = metrics.loader_cores + trainer_cores
        ev.append(
            f"the loader's readers used {metrics.loader_cores:.1f} and the trainer {trainer_cores:.1f} of the "
            f"{cores} usable core(s): "
            + (
                "fewer workers, or decode off the CPU (DALI mixed), leaves the trainer its cores"
                if used >= 0.9 * cores
                else "together less than the host has, so other processes on the host took the rest"
            )
        )
    if metrics.device_busy_s is not None and metrics.au_basis and "GPU" in metrics.au_basis:
        ev.append(f"the GPU was busy {100 * metrics.au:.0f} % of the wall")
    return ev


def synchronous_verdict(
    online: Verdict,
    *,
    au: float,
    data_wait: float,
    peer_wait: float,
    allreduce: float,
    straggler_cost: float | None,
    slowest: str,
    fabric: str,
) -> Verdict:
    """The verdict of a synchronous multi-rank job: ``online`` (the ranks' stage timers together)
    unless waiting for peers or the modelled all-reduce costs the ranks more of the interval than
    waiting for their own data. ``data_wait``, ``peer_wait`` and ``allreduce`` are the ranks' mean
    shares of the interval; ``slowest`` says which rank the others waited for, and why."""
    ev = [
        *online.evidence,
        f"in step, the ranks spent {100 * au:.0f} % of the interval computing, {100 * data_wait:.0f} % waiting "
        f"for their own batch, {100 * peer_wait:.0f} % waiting for the slowest rank and "
        f"{100 * allreduce:.0f} % in the all-reduce modelled on {fabric}",
    ]
    if straggler_cost is not None:
        ev.append(
            f"without waiting for peers the ranks would have run at AU {au + straggler_cost:.2f}: "
            f"waiting for the slowest cost {straggler_cost:.2f} of AU"
        )
    ev.append(f"the slowest: {slowest}")
    if au >= AU_TARGET or max(peer_wait, allreduce) <= data_wait:
        return replace(online, evidence=tuple(ev))
    if peer_wait >= allreduce:
        return replace(
            online,
            bound="straggler",
            binding_stage=None,
            headline=(
                f"straggler-bound: the ranks waited {100 * peer_wait:.0f} % of the time for the slowest rank, "
                f"more than for their own data ({100 * data_wait:.0f} %)"
            ),
            evidence=tuple(ev),
        )
    return replace(
        online,
        bound="allreduce",
        binding_stage=None,
        headline=(
            f"all-reduce-bound ({fabric}): the modelled gradient all-reduce takes {100 * allreduce:.0f} % of "
            f"the time, more than the ranks wait for data ({100 * data_wait:.0f} %)"
        ),
        evidence=tuple(ev),
    )
