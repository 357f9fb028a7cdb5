"""Where the probed job starves its accelerator, in a sweep's words, with the evidence and what to do.

In order, as a sweep's verdict (iobench/analysis/verdict.py): **host-bound** when the trainer's own
step ran much slower than alone while its data was there (needs the step alone: ``--ceilings``);
**accelerator-bound** when the step kept the device at least 90 % busy; otherwise the loop waited
for its data and the readers' own clocks say why:

- the readers (DataLoader workers) were busy making batches nearly all the time: making them is the
  limit, and a sample's time in the dataset says which part: **fetch** when it was mostly blocked
  (neither on a core nor waiting for one: storage, a sleep), **prep** (decode) when it was mostly
  CPU or waiting for a core, **prep (collate)** when collate took the most;
- the readers idled while the loop still waited: the batches were made but not handed over in time
  — **prep (collate)**, read as collate/IPC: pickling, shared memory, pinning; or **prep (h2d)** when
  the copies to the device took more of the wall than the waits.

The two ceilings (the step alone, the loader alone) are the differential method on the job itself:
whichever is lower binds, and the verdict says whether it names the same part.
"""

from __future__ import annotations

from dataclasses import replace

from iobench.analysis.differential import combine
from iobench.analysis.verdict import AU_TARGET, host_bound
from iobench.host.units import format_bytes
from iobench.results.figures import Attribution, PipelineMetrics, Verdict, WallSplit

from .workers import LoaderWork

BUSY = 0.80  # the readers' share of the time making batches at or above which making them binds
SATURATED = 0.90  # the share of the usable cores at or above which the CPU is spent
# the online bound as the differential method's parts name it: the trainer's host is the consumer's
PART = {"accelerator": "accelerator", "host": "accelerator", "prep": "prep", "fetch": "fetch"}


def _rate(x: float) -> str:
    return f"{x:,.0f}/s"


def judge(
    metrics: PipelineMetrics,
    work: LoaderWork | None,
    *,
    cores: int,
    workers: int,
    split: WallSplit | None = None,
    unseen: str | None = None,
    pin_ms_per_batch: float | None = None,
) -> Verdict:
    """The verdict of one rank's measured window, its evidence strongest first and what to do.
    ``work`` is what its readers did over the window (None where the hooks could not see them:
    ``unseen`` says why); ``split`` the window's wall split where the steps' batches were matched to
    their making (its hand-over is then measured)."""
    window = _Window(metrics, work, cores, workers, split, pin_ms_per_batch)
    found = window.host() or window.accelerator() or window.h2d()
    if found is not None:
        return found
    if work is None:
        return window.verdict(
            "unknown",
            f"input-bound, stage not seen: the loop waited {100 * metrics.stall_fraction:.0f} % of the time",
            "time the loader alone (--ceilings) to see what it can deliver",
            [f"the loader's own work could not be split: {unseen or 'no reader reported a batch'}"],
        )
    return window.opening(work) or window.handover(work) or window.making(work)


class _Window:
    """One rank's measured window and the rules a verdict is found by, in the order :func:`judge`
    tries them: each returns its verdict, or None when its rule does not hold."""

    def __init__(
        self,
        metrics: PipelineMetrics,
        work: LoaderWork | None,
        cores: int,
        workers: int,
        split: WallSplit | None,
        pin_ms_per_batch: float | None,
    ) -> None:
        self.metrics, self.work, self.cores, self.workers = metrics, work, cores, workers
        self.split, self.pin_ms_per_batch = split, pin_ms_per_batch
        self.measured = (
            f"measured {_rate(metrics.samples_per_s)} at AU {metrics.au:.2f} ({metrics.au_basis}); the loop "
            f"waited for its batch {100 * metrics.stall_fraction:.0f} % of the time (wait p50 "
            f"{metrics.wait_p50_ms:.1f} ms, p99 {metrics.wait_p99_ms:.1f} ms)"
        )
        self.readers = [_work_line(work, workers)] if work is not None else []
        self.used = (work.cores if work else 0.0) + (metrics.trainer_cores or 0.0)
        self.cores_line = (
            f"the readers used {work.cores if work else 0.0:.1f} core(s) and the training process "
            f"{metrics.trainer_cores or 0.0:.1f} of the {cores} usable"
        )

    def verdict(
        self, bound: str, headline: str, action: str | None, first: list[str], stage: str | None = None
    ) -> Verdict:
        work = self.work
        return Verdict(
            bound=bound,
            binding_stage=stage,
            headline=headline,
            evidence=(*first, self.measured, *self.readers),
            pipeline_capacity_samples_per_s=work.capacity if work else None,
            cpu_capacity_samples_per_s=1000.0
            * self.cores
            / (work.cpu_ms + work.per_sample_ms(work.collate_cpu_s))
            if work and work.cpu_ms > 0
            else None,
            action=action,
        )

    def host(self) -> Verdict | None:
        host = host_bound(self.metrics, self.cores)
        if host is None:
            return None
        return self.verdict(
            "host",
            f"host-bound (the trainer starved of CPU): its step took {self.metrics.trainer_slowdown:.1f}x as "
            "long in the job as alone, while its data was there",
            "leave the trainer its cores: fewer workers, or decode off the CPU (DALI mixed), or more cores",
            host,
        )

    def accelerator(self) -> Verdict | None:
        metrics, work = self.metrics, self.work
        if metrics.au < AU_TARGET:
            return None
        first = []
        if work and work.capacity:
            first.append(
                f"the readers could make about {_rate(work.capacity)} "
                f"({work.capacity / max(metrics.samples_per_s, 1e-9):.1f}x what the step took)"
            )
        return self.verdict(
            "accelerator",
            f"accelerator-bound: the input pipeline kept the step {100 * metrics.au:.0f} % busy",
            "the input pipeline is not the limit; a faster step (or device) is",
            first,
        )

    def h2d(self) -> Verdict | None:
        metrics = self.metrics
        share = metrics.h2d_s / metrics.wall_s if metrics.wall_s > 0 else 0.0
        if share < max(metrics.stall_fraction, 1 - AU_TARGET):
            return None
        return self.verdict(
            "prep",
            f"input-bound by h2d: copies to the device take {100 * share:.0f} % of the time",
            "pin_memory=True with non_blocking copies, or copy less (uint8 images, not float32)",
            [
                f"copies to the device took {100 * share:.0f} % of the wall, more than the loop waited for data"
            ],
            "h2d",
        )

    def opening(self, work: LoaderWork) -> Verdict | None:
        split = self.split
        if split is None or split.loader_start <= max(split.wait - split.loader_start, 0.0):
            return None
        return self.verdict(
            "prep",
            f"input-bound by the epoch's opening: {100 * split.loader_start:.0f} % of the time the loop waited "
            "for the loader to start",
            "persistent_workers=True, so each epoch's workers are up before it starts",
            [
                f"opening each epoch took {100 * split.loader_start:.0f} % of the wall: the loader's iterator built "
                "anew (its workers started) while the loop waited"
            ],
            "loader_start",
        )

    def handover(self, work: LoaderWork) -> Verdict | None:
        # Only idle readers make the hand-over the limit: a reader busy nearly all the time sets the
        # rate, and its batches reaching the loop after they were made is latency in the pipe (a busy
        # spawned worker's batches arrived one batch's making late), not a rate. Where the batches
        # are matched to their making, the measured hand-over must also outweigh the making.
        split, stall = self.split, self.metrics.stall_fraction
        handed = self.workers > 0 and work.busy < BUSY
        if handed and split is not None:
            handed = split.handover > split.wait - split.handover - split.loader_start
        if not handed:
            return None
        pin = f"; pinning took {self.pin_ms_per_batch:.1f} ms a batch" if self.pin_ms_per_batch else ""
        return self.verdict(
            "prep",
            f"input-bound by collate/IPC: the workers idled {100 * (1 - work.busy):.0f} % of the time while the "
            f"loop waited {100 * stall:.0f} %",
            "look at what crosses from the workers (big or many tensors per batch, Python objects) and at "
            "pinning; raise prefetch_factor, keep persistent_workers=True",
            [
                f"the workers made batches only {100 * work.busy:.0f} % of the time, yet the loop waited "
                f"{100 * stall:.0f} %"
                + (f", {100 * split.handover:.0f} % for batches already made" if split is not None else "")
                + f": batches were made but not handed over in time (collate {work.collate_ms:.2f} ms a sample "
                f"in the workers{pin})",
                self.cores_line,
            ],
            "collate",
        )

    def making(self, work: LoaderWork) -> Verdict:
        """Making the batches binds: the largest part of a sample's time in the readers says which."""
        waiting = work.per_sample_ms(work.get_runq_s)  # runnable, no core free: too few cores for the work
        parts = {
            "fetch": work.blocked_ms,
            "decode": work.cpu_ms,
            "cores": waiting,
            "collate": work.collate_ms,
        }
        binding = max(parts, key=parts.__getitem__)
        if binding == "fetch":
            return self.fetch(work, parts)
        if binding == "cores":
            return self.waiting_for_cores(work, waiting)
        return self.prep(work, parts, binding)

    def fetch(self, work: LoaderWork, parts: dict[str, float]) -> Verdict:
        cores, used = self.cores, self.used
        per_reader = work.bytes_per_sample / (work.blocked_ms / 1000.0) if work.blocked_ms > 0 else 0.0
        return self.verdict(
            "fetch",
            f"fetch-bound (storage): a sample waits {work.blocked_ms:.1f} ms for its bytes, "
            f"{100 * work.blocked_ms / (sum(parts.values()) or 1.0):.0f} % of its time in the readers",
            (
                f"more workers (the CPU has room: {used:.1f} of {cores} cores busy) or more reads in flight; "
                if used < SATURATED * cores
                else ""
            )
            + "a cache or a faster tier (the sweep file this probe wrote compares tiers)",
            [
                f"a sample's {work.get_ms:.1f} ms in the dataset is {work.blocked_ms:.1f} ms blocked (storage, "
                f"sleeps) against {work.cpu_ms:.1f} ms of CPU: its {format_bytes(work.bytes_per_sample)} arrive at "
                f"{format_bytes(per_reader)}/s per reader",
                self.cores_line,
            ],
            "fetch",
        )

    def waiting_for_cores(self, work: LoaderWork, waiting: float) -> Verdict:
        # the readers wait for a core more than anything else: the job's own processes fill the
        # cores, or other processes on the host hold them
        cores, used = self.cores, self.used
        saturated = used >= SATURATED * cores
        return self.verdict(
            "prep",
            f"prep-bound (readers waiting for a core): a sample waits {waiting:.1f} ms for a core against "
            f"{work.cpu_ms:.1f} ms of CPU and {work.blocked_ms:.1f} ms blocked",
            "fewer workers or fewer intra-op threads (torch.set_num_threads), or more cores"
            if saturated
            else "free the host's cores (other jobs run on it), or give the job cores of its own (taskset, a cgroup)",
            [
                f"the readers wait {waiting:.1f} ms a sample for a core: "
                + (
                    f"the job's own processes fill the {cores} cores ({used:.1f} busy)"
                    if saturated
                    else f"the job's own processes use {used:.1f} of the {cores} cores, so other processes on the "
                    "host hold them"
                ),
                self.cores_line,
            ],
            "decode",
        )

    def prep(self, work: LoaderWork, parts: dict[str, float], binding: str) -> Verdict:
        cores, used = self.cores, self.used
        saturated = used >= SATURATED * cores
        what = "collate" if binding == "collate" else "decode/augment in the dataset"
        return self.verdict(
            "prep",
            f"prep-bound (CPU {what}): {100 * parts[binding] / (sum(parts.values()) or 1.0):.0f} % of each "
            "reader's time per sample" + (", every core busy" if saturated else ""),
            f"the {cores} cores are spent: a cheaper decode (simplejpeg, pillow-simd, smaller or pre-resized "
            "images), decode on the GPU (DALI mixed), or more cores"
            if saturated
            else f"more workers: {used:.1f} of {cores} cores are busy",
            [
                f"a sample takes {work.cpu_ms:.1f} ms of CPU in the dataset"
                + (f" and waits {work.runq_ms:.1f} ms for a core" if work.runq_ms >= 0.1 else "")
                + f", {work.blocked_ms:.1f} ms blocked: storage is not the limit",
                self.cores_line,
            ],
            binding,
        )


def _work_line(work: LoaderWork, workers: int) -> str:
    who = f"{workers} worker(s)" if workers else "the loop's own process (no workers)"
    return (
        f"{who} made {work.samples} samples: {work.get_ms:.2f} ms each in the dataset ({work.cpu_ms:.2f} CPU, "
        f"{work.per_sample_ms(work.get_runq_s):.2f} waiting for a core, {work.blocked_ms:.2f} blocked), "
        f"collate {work.collate_ms:.2f} ms; busy {100 * work.busy:.0f} % of the time; "
        f"{format_bytes(work.bytes_per_sample)} read per sample"
    )


def differential(online: Verdict, ceilings: dict[str, float], metrics: PipelineMetrics) -> Attribution:
    """The two ceilings against the online verdict: ``ceilings`` has ``accelerator`` (the step alone)
    and the loader alone as ``prep`` or ``fetch`` (what bound it). The online verdict's host-bound
    counts as the consumer's side (the step alone is what a starved trainer falls short of)."""
    part = PART.get(online.bound, online.bound)
    attribution = combine(
        ceilings, replace(online, bound=part), measured_samples_per_s=metrics.samples_per_s, au=metrics.au
    )
    return replace(attribution, online_bound=online.bound)


def ceilings_said(online: Verdict, ceilings: dict[str, float]) -> Verdict:
    """A verdict the readers' clocks could not split (DALI's own threads, workers not reached), told by
    the two ceilings alone: which of the loader alone and the step alone is the lower."""
    step = ceilings["accelerator"]
    loader = next(v for k, v in ceilings.items() if k != "accelerator")
    said = f"the loader alone delivered {_rate(loader)}, the step alone took {_rate(step)}"
    if step <= loader:
        return replace(
            online,
            bound="accelerator",
            headline=f"accelerator-bound by the ceilings: {said}",
            evidence=(said, *online.evidence),
            action="the input pipeline is not the limit; a faster step (or device) is",
        )
    return replace(
        online,
        headline=f"input-bound, stage not seen: {said}",
        evidence=(said, *online.evidence),
        action="more of the loader's own parallelism (DALI: num_threads, GPU decode with device='mixed'), "
        "or a faster store; its stages run where the probe cannot time them",
    )
