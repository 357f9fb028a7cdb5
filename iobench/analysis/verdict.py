"""Where the pipeline starves the accelerators, in plain words, with the evidence and what to do: the
one judge of sweep cells, multi-rank jobs and probed jobs (docs/method.md, The verdict).

Each front door fills one :class:`~iobench.analysis.evidence.Evidence` and calls :func:`judge`. Its
rules are tried in this order; the first that holds is the verdict:

1. **not judged**: the window is too short to say anything (a job that crashed after a few steps);
2. **synchronous ranks** that waited longer for the slowest rank (straggler-bound) or in the
   modelled all-reduce (all-reduce-bound) than for their own data, below the target AU;
3. **accelerator-bound**: a device kept at least 90 % busy (MLPerf Storage's rule);
4. **checkpoint saves**: the trainer blocked saving its checkpoints longer than it waited for data
   (host-bound, stage ``checkpoint``);
   **the epoch's opening**: the loop waited for the loader to start (workers started anew each
   epoch) more than for its batches — the cores such start-ups burn are waste, not a budget;
5. **cores-bound (the cores are spent)**: the trainer, the readers, iobench and the rest of the host
   filled the usable cores: no worker count helps, only more cores or work off the CPU;
6. **host-bound (the trainer starved)**: its step ran much slower than alone while its data was there;
7. **host-bound (the trainer's own step)**: the trainer alone, timed on a quiet host, cannot reach
   its demand, and the data kept up with it;
8. **accelerator-bound** where the host is the device (a step on the CPU kept it 90 % busy);
9. **h2d**: the copies to the device took more of the wall than the waits for data;
10. **stage not seen**: no reader timers (the ceilings say what they can);
11. **hand-over**: the readers idled while the loop waited (collate/IPC);
12. **making the batches**: the largest part of a sample's time in the readers says which — fetch
    (by the object client, or the store), waiting for a core, or the CPU of a prep stage.

The headline is composed once, from the final inputs: samples the epochs lost first (losses.py), then
the trainer's shortfall where there is one, the finding, and what limits the window's figures after it. Nothing amends it afterwards. The verdict
carries the window's core budget and the cores one accelerator takes to be fed (analysis/cores.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iobench.host.cpuload import QUIET_OTHERS, SLOWED
from iobench.results.choices import Bound
from iobench.results.figures import CoreBudget, CoresNeeded, PipelineMetrics, Verdict
from loaders.observe import RequestCounts

from .cores import cores_needed, describe_cores
from .evidence import ClientFacts, Evidence, ReaderWork
from .losses import loss_line

AU_TARGET = 0.90
# the trainer's median step in the window over its step alone above which a stretched step can be
# called host-bound (docs/method.md, The trainer's host)
HOST_SLOWDOWN = 1.5
# ... and the stall fraction at or below which the data was there: the trainer's step set the pace
HOST_STALL = 0.10
# the readers' share of the window making batches below which they idled (the hand-over rule)
BUSY = 0.80
# the object client's CPU over the readers' time at or above which a fetch-bound window is bound
# by the client, not the store: between minio's 0.19 and s3fs's 0.32 measured on the same objects
# (docs/method.md, Storage requests and caches)
CLIENT_BOUND = 0.25
# the least a window short of what it was asked is judged on: fewer measured steps or seconds say
# nothing of a pipeline (a job that crashed after a few steps)
LEAST_STEPS = 5
LEAST_SECONDS = 0.5
GIB = 2**30
AU_ON_HOST = "CPU step (the host is the device)"


def _rate(x: float) -> str:
    return f"{x:,.0f}/s"


@dataclass
class _Found:
    """A rule's finding, before the headline is composed."""

    bound: Bound
    headline: str
    action: str | None
    stage: str | None = None
    first: list[str] = field(default_factory=list)  # evidence that argues it, strongest first
    prefixed: bool = True  # the trainer's shortfall may lead its headline


def judge(evidence: Evidence) -> Verdict:
    """The verdict of one window: the first rule that holds, its evidence strongest first."""
    return _Judge(evidence).verdict()


class _Judge:
    """The rules in the order :func:`judge` tries them: each returns its finding, or None."""

    def __init__(self, ev: Evidence) -> None:
        self.ev, self.m, self.work = ev, ev.metrics, ev.work
        self.alone = trainer_alone(self.m, ev.demand / ev.trainers if ev.demand else None)
        self.short = self.alone.short
        self.need = _need(ev, self.alone)
        self.client_share: float | None = None
        self.said: list[str] = []  # evidence every verdict carries, after its own

    def verdict(self) -> Verdict:
        self._context()
        found = (
            self.too_short()
            or self.synchronous()
            or self.accelerator(on_device=True)
            or self.checkpointing()
            or self.opening()
            or self.cores_spent()
            or self.starved_host()
            or self.short_trainer()
            or self.accelerator(on_device=False)
            or self.h2d()
            or self.unseen()
            or self.handover()
            or self.making()
        )
        return self._compose(found)

    # -- the evidence every verdict carries --------------------------------------------------------

    def _context(self) -> None:
        m, ev, work = self.m, self.ev, self.work
        if self.short:
            self.said.append(self.short)
        elif self.alone.busy:
            self.said.append(self.alone.busy)
        self.said.append(
            f"measured {_rate(m.samples_per_s)} at AU {m.au:.2f}; the accelerator waited "
            f"{100 * m.stall_fraction:.0f} % of the time (wait p50 {m.wait_p50_ms:.1f} ms, "
            f"p99 {m.wait_p99_ms:.1f} ms)"
        )
        if work is not None and work.wall_ms > 0:
            parts = ", ".join(
                f"{s.stage} {s.wall_ms_per_sample:.2f} ms ({100 * s.share:.0f} %)" for s in work.stages
            )
            who = (
                f"{work.readers} reader(s) spend"
                if work.workers
                else "the loop's own process (no workers) spends"
            )
            self.said.append(f"per sample, {who} {work.wall_ms:.2f} ms: {parts}")
        if ev.budget is not None:
            self.said.append(budget_line(ev.budget))
        if self.need is not None:
            self.said.append(describe_cores(self.need))
        if ev.client is not None:
            self.client_share = self._client(ev.client)
        self.said.extend(ev.ranks)
        if ev.demand and not self.short:
            whom = (
                "the accelerator demands"
                if ev.accelerators == 1
                else f"the {ev.accelerators} accelerators demand"
            )
            self.said.append(f"{whom} {_rate(ev.demand)}")

    def _client(self, client: ClientFacts) -> float | None:
        """The object client's cost per request and per GiB, said as evidence; its share of the
        readers' time (client_cpu_s / (readers x wall)) for the fetch rule, None without requests."""
        c = self.ev.counters.requests or RequestCounts()
        requests, cpu_s, nbytes = c.requests, c.client_cpu_s, c.bytes_transferred
        said = f"client: {client.name} {client.version}: "
        if not requests:
            self.said.append(said + "made no requests over the measured steps")
            return None
        per_gib = f", {cpu_s / (nbytes / GIB):.1f} CPU-s per GiB" if nbytes else ""
        reported = c.client_retries
        own = (
            "0 (turned off)"
            if client.own_retries is None
            else f"{reported} counted ({client.own_retries})"
            if reported
            else f"not counted ({client.own_retries})"
        )
        self.said.append(
            said + f"{1000 * cpu_s / requests:.2f} ms of CPU per request{per_gib}; its own retries: {own}"
        )
        readers = self.work.readers if self.work is not None else 1
        return cpu_s / (readers * self.m.wall_s) if self.m.wall_s > 0 else None

    # -- composing the verdict once ------------------------------------------------------------------

    def _compose(self, found: _Found) -> Verdict:
        headline = found.headline
        if self.short and found.prefixed and found.bound not in ("host", "unknown"):
            headline = f"{self.short}; and {headline}"
        headline += "".join(f" [{note}]" for note in self._window_notes())
        if (
            self.ev.loss is not None
        ):  # a rate measured on fewer samples than the plan is no rate of the dataset
            headline = f"{loss_line(self.ev.loss)}; {headline}"
        work = self.work
        cpu_cap = (
            1000.0 * self.ev.cores / work.cpu_ms
            if work is not None and work.cpu_ms > 0 and found.bound != "unknown"
            else None
        )
        return Verdict(
            bound=found.bound,
            binding_stage=found.stage,
            headline=headline,
            evidence=(*found.first, *self.said),
            stages=work.stages if work is not None else (),
            pipeline_capacity_samples_per_s=work.capacity if work is not None else None,
            cpu_capacity_samples_per_s=cpu_cap,
            demand_samples_per_s=self.ev.demand,
            action=found.action,
            budget=self.ev.budget,
            cores=self.need,
        )

    def _window_notes(self) -> list[str]:
        """What limits the window's figures: short of what was asked, or cold but served cached."""
        w, least = self.ev.window, self.ev.least
        if w is None:
            return []
        notes = []
        if not w.met and least is not None:
            notes.append(
                f"measured only {w.steps} steps over {w.seconds:.2f} s after warm-up (asked: {least.describe()}), "
                f"stopped by {w.short_because}: treat the figures as indicative"
            )
        if w.cached:
            notes.append(
                f"asked to be cold, but over the measured window the cell's processes read from block devices "
                f"{100 * (w.device_read_share or 0.0):.1f} % of the bytes the loader read: the window was served "
                "from the page cache, not the tier (the warm-up took the cold reads, or epochs added to reach the "
                "window re-read cached data); a dataset with run.min_measure's steps in one epoch measures it cold"
            )
        return notes

    # -- the rules -----------------------------------------------------------------------------------

    def too_short(self) -> _Found | None:
        w = self.ev.window
        if w is None or w.met or (w.steps >= LEAST_STEPS and w.seconds >= LEAST_SECONDS):
            return None
        steps, seconds = w.steps, w.seconds
        return _Found(
            "unknown",
            f"not judged: the window is {steps} step(s) over {seconds:.2f} s, too short to say what binds",
            "measure longer: a job that runs on (more steps or epochs), or a lower --steps/--seconds",
            prefixed=False,
        )

    def synchronous(self) -> _Found | None:
        s = self.ev.sync
        if s is None:
            return None
        self.said.append(
            f"in step, the ranks spent {100 * self.m.au:.0f} % of the interval computing, {100 * s.data_wait:.0f} % "
            f"waiting for their own batch, {100 * s.peer_wait:.0f} % waiting for the slowest rank and "
            f"{100 * s.allreduce:.0f} % in the all-reduce modelled on {s.fabric}"
        )
        if s.straggler_cost is not None:
            self.said.append(
                f"without waiting for peers the ranks would have run at AU {self.m.au + s.straggler_cost:.2f}: "
                f"waiting for the slowest cost {s.straggler_cost:.2f} of AU"
            )
        self.said.append(f"the slowest: {s.slowest}")
        if self.m.au >= AU_TARGET or max(s.peer_wait, s.allreduce) <= s.data_wait:
            return None
        if s.peer_wait >= s.allreduce:
            return _Found(
                "straggler",
                f"straggler-bound: the ranks waited {100 * s.peer_wait:.0f} % of the time for the slowest rank, "
                f"more than for their own data ({100 * s.data_wait:.0f} %)",
                "make the slowest rank's input faster (its own verdict says which part), or give the ranks the "
                "same share of the data and the cores",
            )
        return _Found(
            "allreduce",
            f"all-reduce-bound ({s.fabric}): the modelled gradient all-reduce takes {100 * s.allreduce:.0f} % of "
            f"the time, more than the ranks wait for data ({100 * s.data_wait:.0f} %)",
            "a faster fabric, gradient compression or overlap of the all-reduce with the backward pass",
        )

    def accelerator(self, *, on_device: bool) -> _Found | None:
        m = self.m
        if m.au < AU_TARGET or (on_device and m.au_basis == AU_ON_HOST):
            return None
        cap = self.work.capacity if self.work is not None else None
        first = []
        if cap and m.samples_per_s > 0:
            first.append(
                f"the readers could deliver about {_rate(cap)} ({cap / m.samples_per_s:.1f}x what the step took)"
            )
        return _Found(
            "accelerator",
            f"accelerator-bound: the input pipeline keeps the accelerator {100 * m.au:.0f} % busy",
            "nothing on the input side: a faster step (or device) is the next limit",
            first=first,
        )

    def cores_spent(self) -> _Found | None:
        b = self.ev.budget
        if b is None or not b.spent:
            return None
        # readers blocked on their store wait for it whoever holds the cores (a link at its cap):
        # spent cores bind only where the readers wanted a core, or the trainer was starved of one
        waits_on_store = (
            self.work is not None and self.work.wall_ms > 0 and self._making_part(self.work) == "fetch"
        )
        if waits_on_store and host_bound(self.m, self.ev.cores) is None:
            return None
        more = (
            f"{self.need.per_accelerator:.1f} cores per accelerator ({self.need.loader:.1f} for the loader, "
            f"{self.need.trainer:.1f} for the trainer) to feed {_rate(self.need.samples_per_s)}"
            if self.need is not None
            else "more cores"
        )
        others = (
            f"; other processes used {b.others:.1f} of them: free those first"
            if b.others >= 0.25 * b.usable
            else ""
        )
        return _Found(
            "cores",
            f"cores-bound (the cores are spent): the trainer, the loader's readers and the rest of the host used "
            f"{b.used:.1f} of the {b.usable} usable cores",
            f"no worker count helps: it takes {more}, or decode off the CPU (DALI mixed){others}",
            first=[
                f"the cores are spent: the trainer used {b.trainer:.1f}, the readers {b.readers:.1f}, iobench "
                f"{b.own:.1f} and other processes {b.others:.1f} of {b.usable}, so more workers would take cores "
                "from the trainer and fewer would slow the loader"
            ],
        )

    def starved_host(self) -> _Found | None:
        lines = host_bound(self.m, self.ev.cores)
        if lines is None:
            return None
        return _Found(
            "host",
            f"host-bound (the trainer starved of CPU): its step took {self.m.trainer_slowdown:.1f}x as long "
            "in the window as alone, while its data was there",
            "leave the trainer its cores: decode off the CPU (DALI mixed), fewer intra-op threads in the "
            "loader's workers, or more cores",
            first=lines,
        )

    def short_trainer(self) -> _Found | None:
        if not self.short or self.m.stall_fraction > HOST_STALL:
            return None
        return _Found(
            "host",
            "host-bound (the trainer's own step): " + self.short + "; the data kept up with it",
            "the trainer, not the data: a larger batch per accelerator spreads its host work over more samples; "
            "if its host work is the documented default, `iobench calibrate --model <model>` measures yours",
            "trainer",
        )

    def h2d(self) -> _Found | None:
        m = self.m
        share = m.h2d_s / m.wall_s if m.wall_s > 0 else 0.0
        if share < max(m.stall_fraction, 1 - AU_TARGET):
            return None
        return _Found(
            "prep",
            f"input-bound by h2d: copies to the device take {100 * share:.0f} % of the time",
            "pin_memory=True with non_blocking copies, or copy less (uint8 images, not float32)",
            "h2d",
            [
                f"copies to the device took {100 * share:.0f} % of the wall, more than the loop waited for data"
            ],
        )

    def unseen(self) -> _Found | None:
        work, ev = self.work, self.ev
        if work is not None and work.wall_ms > 0:
            return None
        why = ev.unseen or "the loader reported no stage times"
        c = ev.ceilings
        if c is not None and c.accelerator is not None and c.loader is not None:
            step, loader = c.accelerator.samples_per_s, c.loader.samples_per_s
            said = f"the loader alone delivered {_rate(loader)}, the step alone took {_rate(step)}"
            if step <= loader:
                return _Found(
                    "accelerator",
                    f"accelerator-bound by the ceilings: {said}",
                    "nothing on the input side: a faster step (or device) is the next limit",
                    first=[said, f"the loader's own work could not be split: {why}"],
                )
            return _Found(
                "unknown",
                f"input-bound, stage not seen: {said}",
                "more of the loader's own parallelism (DALI: num_threads, GPU decode with device='mixed'), "
                "or a faster store; its stages run where the probe cannot time them",
                first=[said, f"the loader's own work could not be split: {why}"],
            )
        return _Found(
            "unknown",
            f"unknown, stage not seen: the loop waited {100 * self.m.stall_fraction:.0f} % of the time",
            ev.unseen_action,
            first=[f"the loader's own work could not be split: {why}"],
        )

    def checkpointing(self) -> _Found | None:
        """The trainer blocked saving its checkpoints longer than it waited for data (a checkpoint
        cell: its saves' own figures and sentence are in its checkpoint record)."""
        split = self.ev.split
        if split is None or split.checkpoint <= max(split.wait, 1 - AU_TARGET):
            return None
        return _Found(
            "host",
            f"host-bound (checkpoint saves): saving checkpoints blocked the trainer {100 * split.checkpoint:.0f} % "
            f"of the time, more than it waited for data ({100 * split.wait:.0f} %)",
            "save less often, asynchronously from pinned memory (mode async_pinned), or to a faster tier",
            "checkpoint",
            [f"the trainer was blocked saving checkpoints {100 * split.checkpoint:.0f} % of the wall"],
        )

    def opening(self) -> _Found | None:
        split = self.ev.split
        if split is None or split.loader_start <= max(split.wait - split.loader_start, 0.0):
            return None
        return _Found(
            "prep",
            f"input-bound by the epoch's opening: {100 * split.loader_start:.0f} % of the time the loop waited "
            "for the loader to start",
            "persistent_workers=True, so each epoch's workers are up before it starts",
            "loader_start",
            [
                f"opening each epoch took {100 * split.loader_start:.0f} % of the wall: the loader's iterator built "
                "anew and its workers started (until each began its first batch) while the loop waited"
            ],
        )

    def handover(self) -> _Found | None:
        # Only idle readers make the hand-over the limit: a reader busy nearly all the time sets the
        # rate, and its batches reaching the loop after they were made is latency in the pipe (a busy
        # spawned worker's batches arrived one batch's making late), not a rate. Where the batches are
        # matched to their making, the measured hand-over must also outweigh the making.
        work, split, stall = self.work, self.ev.split, self.m.stall_fraction
        assert work is not None
        busy = work.busy
        handed = work.workers > 0 and busy is not None and busy < BUSY and stall > 1 - AU_TARGET
        if handed and split is not None:
            handed = split.handover > split.wait - split.handover - split.loader_start
        if not handed or busy is None:
            return None
        pin = f"; pinning took {self.ev.pin_ms_per_batch:.1f} ms a batch" if self.ev.pin_ms_per_batch else ""
        collate = work.stage("collate").wall_ms_per_sample
        return _Found(
            "prep",
            f"input-bound by collate/IPC: the workers idled {100 * (1 - busy):.0f} % of the time while the "
            f"loop waited {100 * stall:.0f} %",
            "look at what crosses from the workers (big or many tensors per batch, Python objects) and at "
            "pinning; raise prefetch_factor, keep persistent_workers=True",
            "collate",
            [
                f"the workers made batches only {100 * busy:.0f} % of the time, yet the loop waited "
                f"{100 * stall:.0f} %"
                + (f", {100 * split.handover:.0f} % for batches already made" if split is not None else "")
                + f": batches were made but not handed over in time (collate {collate:.2f} ms a sample in the "
                f"workers{pin})"
            ],
        )

    @staticmethod
    def _making_part(work: ReaderWork) -> str:
        """The largest part of a sample's time in the readers: fetch's wall, a CPU stage's CPU, or
        the time waiting for a core ("cores")."""
        parts = {
            "fetch": work.stage("fetch").wall_ms_per_sample,
            **{s: work.stage(s).cpu_ms_per_sample for s in ("decode", "augment", "collate")},
            "cores": work.runq_ms,
        }
        return max(parts, key=parts.__getitem__)

    def making(self) -> _Found:
        """Making the batches binds: the largest part of a sample's time in the readers says which."""
        work = self.work
        assert work is not None
        binding = self._making_part(work)
        if binding == "fetch":
            return self.fetch(work)
        if binding == "cores":
            return self.waiting_for_cores(work)
        return self.prep(work, binding)

    def _room(self) -> str:
        """Whether the host's cores have room for more workers, said from the budget."""
        b = self.ev.budget
        if b is None:
            return ""
        return f" (the CPU has room: {b.used:.1f} of {b.usable} cores busy)"

    def fetch(self, work: ReaderWork) -> _Found:
        fetch = work.stage("fetch")
        first = [
            f"fetch is {fetch.wall_ms_per_sample:.2f} ms per sample of which {work.blocked_ms:.2f} ms waiting on "
            "storage, not CPU"
        ]
        reading = f"reading takes {100 * fetch.share:.0f} % of each reader's time per sample"
        client, share = self.ev.client, self.client_share
        if client is not None and share is not None:
            by_client = share >= CLIENT_BOUND
            first.append(
                f"{client.name}'s own CPU took {100 * share:.0f} % of the readers' time "
                f"({'at or above' if by_client else 'below'} the {100 * CLIENT_BOUND:.0f} % at which the "
                "client, not the store, binds)"
            )
            if by_client:
                return _Found(
                    "fetch",
                    f"fetch-bound by the client ({client.name}), not the store: its CPU takes "
                    f"{100 * share:.0f} % of the readers' time; {reading}",
                    other_client(client.name),
                    "fetch",
                    first,
                )
        return _Found(
            "fetch",
            f"fetch-bound (storage): {reading}",
            "a faster tier or a cache in front of it, or more reads in flight (more workers"
            + self._room()
            + ", a higher read concurrency)",
            "fetch",
            first,
        )

    def waiting_for_cores(self, work: ReaderWork) -> _Found:
        b = self.ev.budget
        others = b is not None and b.others >= 0.25 * b.usable
        who = (
            f": other processes used {b.others:.1f} of the {b.usable} cores, the job {b.trainer + b.readers:.1f}"
            if b is not None and others
            else ""
        )
        return _Found(
            "prep",
            f"prep-bound (readers waiting for a core): a sample waits {work.runq_ms:.1f} ms for a core against "
            f"{work.cpu_ms:.1f} ms of CPU and {work.blocked_ms:.1f} ms blocked",
            "free the host's cores (other processes run on it), or give the job cores of its own (taskset, a cgroup)"
            if others
            else "fewer intra-op threads (torch.set_num_threads) beside the loader, or more cores",
            "decode",
            [f"the readers wait {work.runq_ms:.1f} ms a sample for a core{who}"],
        )

    def prep(self, work: ReaderWork, binding: str) -> _Found:
        stage = work.stage(binding)
        prep_share = sum(work.stage(s).share for s in ("decode", "augment", "collate"))
        fetch = work.stage("fetch")
        first = [
            f"fetch is only {fetch.wall_ms_per_sample:.2f} ms per sample "
            f"(alone it could feed {_rate(fetch.capacity_samples_per_s)}): storage is not the limit"
        ]
        more = (
            "more workers" + self._room() if self.ev.budget is not None else "more CPU cores for the loader"
        )
        feeding = (
            f"; feeding {_rate(self.need.samples_per_s)} takes {self.need.per_accelerator:.1f} cores per accelerator"
            if self.need is not None
            else ""
        )
        return _Found(
            "prep",
            f"prep-bound (CPU {work.named(binding)}): decode+augment+collate take {100 * prep_share:.0f} % of each "
            f"reader's time, {binding} alone {100 * stage.share:.0f} %",
            f"{more}{feeding}; or decode on the GPU (DALI mixed)",
            binding,
            first,
        )


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


def budget_line(b: CoreBudget) -> str:
    steal = f"; the hypervisor took {b.steal:.1f}" if b.steal else ""
    return (
        f"cores: the trainer used {b.trainer:.1f}, the loader's readers {b.readers:.1f}, iobench {b.own:.1f} and "
        f"other processes {b.others:.1f} of the {b.usable} usable{steal}"
    )


@dataclass(frozen=True)
class TrainerAlone:
    """What the trainer timed alone says against its demand."""

    takes: float | None  # samples/s it can take: the demand, or less where it falls short of it
    short: str | None  # the finding that it cannot reach its demand, or None
    busy: str | None  # the timing met a busy host, so nothing is judged from it


def while_busy(m: PipelineMetrics) -> str:
    """How the host was busy while the trainer was timed alone: other processes' cores, or, where
    those were few, its fixed work slowed by what the counters do not see."""
    others = f"{m.trainer_alone_others_cores or 0.0:.1f} cores"
    slowed = m.trainer_alone_slowed
    if slowed is not None and slowed >= SLOWED and (m.trainer_alone_others_cores or 0.0) < QUIET_OTHERS:
        return (
            f"while its fixed host work ran {slowed:.2f}x the time it was sized to, other processes at {others} "
            "(work the CPU counters do not see, such as another virtual machine's on the same physical cores)"
        )
    return f"while other processes used {others}"


def trainer_alone(m: PipelineMetrics, demand: float | None) -> TrainerAlone:
    """The trainer alone against ``demand``: short of it only where it was timed on a quiet host and
    even the top of its interval lies below AU_TARGET of the demand."""
    alone = m.trainer_alone_samples_per_s
    if not demand or not alone:
        return TrainerAlone(demand or None, None, None)
    high = m.trainer_alone_high or alone
    if alone >= AU_TARGET * demand:
        return TrainerAlone(demand, None, None)
    if m.trainer_alone_quiet is False:
        busy = (
            f"the trainer alone timed {_rate(alone)} of the {_rate(demand)} demanded {while_busy(m)}: the host "
            "was busy, so it is not judged short"
        )
        return TrainerAlone(demand, None, busy)
    if high >= AU_TARGET * demand:
        return TrainerAlone(demand, None, None)
    short = (
        f"the trainer alone steps at {_rate(alone)} of the {_rate(demand)} demanded, so its AU "
        f"cannot pass {min(1.0, alone / demand):.2f} whatever feeds it: host-bound before any data"
    )
    return TrainerAlone(alone, short, None)


def _need(ev: Evidence, alone: TrainerAlone) -> CoresNeeded | None:
    """The cores one accelerator takes to be fed: at its demand (or what its trainer alone takes),
    else at the rate the caller names (a probed job's step alone), from the window's measured CPU
    per sample: the readers' and the trainer's, each counted once."""
    m, b, work = ev.metrics, ev.budget, ev.work
    if alone.takes:  # a trainer's rate: its accelerators share it
        rate = alone.takes * ev.trainers / ev.accelerators
        fed = "the demand" if alone.short is None else "what the trainer alone takes"
    elif ev.feed is not None:
        rate, fed = ev.feed
    else:
        return None
    if m.samples <= 0 or rate <= 0:
        return None
    per_sample_ms = 1000.0 * m.wall_s / m.samples  # cores' worth x this = CPU-ms per sample
    if b is not None:
        loader_ms, trainer_ms = b.readers * per_sample_ms, b.trainer * per_sample_ms
    elif work is not None:  # no host counters: the readers' stage CPU, and the trainer's where measured
        loader_ms, trainer_ms = work.cpu_ms, (m.trainer_cores or 0.0) * per_sample_ms
    else:
        return None
    return cores_needed(rate, fed, loader_cpu_ms=loader_ms, trainer_cpu_ms=trainer_ms)


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
        f"the trainer's step took {1000 * alone * slowdown:.1f} ms (median) in the window against "
        f"{1000 * alone:.1f} ms alone: {slowdown:.2f}x; the stretch is {100 * stretch:.0f} % of the wall, "
        f"waiting for data {100 * metrics.stall_fraction:.0f} %"
    ]
    if metrics.trainer_cpu_ms_per_step is not None:
        ev.append(f"the trainer used {metrics.trainer_cpu_ms_per_step:.1f} CPU-ms per step of its own")
    if metrics.device_busy_s is not None and metrics.au_basis and "GPU" in metrics.au_basis:
        ev.append(f"the GPU was busy {100 * metrics.au:.0f} % of the wall")
    return ev
