"""What a sweep's results say about this host and its tiers, as the recommender's inputs.

From every ``ok`` cell of one or more run directories:

- the CPU cost of a sample: the readers' thread CPU time per sample in fetch, decode, augment
  and collate (stage timers, ``summary.json``), by loader kind;
- the CPU per sample the stage timers do not see, from the cells whose CPU binds: the loader's
  overhead (worker loop, IPC) from cells with fewer workers than cores, and the training
  process's share (receiving batches) from cells whose workers fill the cores;
- each tier's fetch bandwidth: fetch ceilings (diagnose), else what the cells the tier held back
  delivered, else (a lower bound) the best any cell delivered; and its request latency;
- what one GPU decodes with DALI, where a DALI cell on a CUDA host measured it, and the host CPU
  such a cell's process still spent per sample (DALI's threads run in it);
- the shard caches' measured hit ratios beside the model's (:func:`model.hit_ratio`).

Only cold cells measure a tier: a warm cell reads the page cache or a shard cache.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from loaders.observe import STAGES

from ..results.figures import CoresNeeded
from ..results.store import cell_summaries, read_manifest
from ..results.summary import CellManifest, CellSummary
from .model import hit_ratio

# a reader that waits on storage for less than this share of its time is taken as CPU-bound
STORAGE_WAIT_CPU_BOUND = 0.10
# file systems whose files live on other hosts: a local tier on one measures a shared file system
SHARED_FILESYSTEMS = (
    "nfs",
    "nfs4",
    "lustre",
    "gpfs",
    "wekafs",
    "beegfs",
    "cifs",
    "smb3",
    "ceph",
    "fuse.ceph-fuse",
)


# where a figure comes from: measured by a sweep's cells; given by the user (a flag, a file, a
# benchmark's JSON); published (a datasheet, a vendor's guide, a claim, as it stands at its source);
# derived (computed from published figures, the computation said); iobench's own reference
# measurement on another machine (docs/recommend.md); or an assumption of the model
Origin = Literal["measured", "given", "published", "derived", "reference", "assumed"]
# the figures an answer may be judged on: what was measured or given for this case
KNOWN: tuple[Origin, ...] = ("measured", "given")


@dataclass(frozen=True)
class Figure:
    """A number and where it came from; ``lower_bound``: the tier can do at least this; ``caveat``:
    why it may not be what it is taken for (an answer is not judged on such a figure)."""

    value: float
    source: str
    lower_bound: bool = False
    origin: Origin = "assumed"
    caveat: str = ""

    @property
    def known(self) -> bool:
        return self.origin in KNOWN and not self.caveat


@dataclass(frozen=True)
class MeasuredOn:
    """Where a cell measured: its host and the storage under its tier (the cell's manifest)."""

    hostname: str
    cpu_model: str
    usable_cpus: int
    memory_bytes: int
    cuda: bool
    device_kind: str  # nvme | nvme-raid | virtio | disk | remote | pfs (a shared file system) | unknown
    device: str  # the same in words, e.g. "md0: raid0 of 4 NVMe (SAMSUNG MZQL23T8HCLS)"
    loopback: bool = False  # a remote tier served from this very host (the lab on 127.0.0.1)


@dataclass(frozen=True)
class CellFacts:
    run: str
    cell_id: str
    tier: str
    tier_kind: str  # local | s3 | rados | cephfs | throttled ...
    loader: str
    workers: int
    batch_size: int
    cores_usable: int  # the host's usable CPUs when the cell ran
    demand: float | None  # samples/s the consumer takes: emulated demand, else the accelerator ceiling
    samples_per_s: float
    au: float  # the summary's AU: device busy / wall
    verdict: str
    cache_achieved: str | None
    cpu_ms: dict[str, float]  # thread CPU per sample, per stage
    wall_ms: dict[str, float]  # wall per sample, per stage, per reader
    sample_bytes: float  # the dataset's mean bytes per sample, tar headers included
    dataset_bytes: float
    fetch_ceiling_bytes_per_s: float | None
    epochs: int
    cache_limit_bytes: float | None
    cache_policy: str  # what the shard cache kept (the tier's description; runs before it: lru)
    last_epoch_hit_ratio: float | None
    request_p50_ms: float | None
    request_p99_ms: float | None
    throttle_bytes_per_s: float | None = None  # a throttled tier's configured cap
    # the consumer's measured step time per sample in the cell (an emulated accelerator's sleep
    # overshoots; with host work, the step as the loader's workers let it run)
    compute_s_per_sample: float | None = None
    # the trainer's step timed alone, per sample: what the consumer can take with no loader beside it
    alone_s_per_sample: float | None = None
    # the device busy per sample: what AU counts (AU = samples/s x this)
    device_s_per_sample: float | None = None
    cuda: bool = False  # the host had a CUDA device: a DALI cell decoded on the GPU
    # the cell process's CPU per sample (the trainer's, and a DALI loader's threads): v6+
    trainer_cpu_ms_per_sample: float | None = None
    # the cores one accelerator takes, as the cell's verdict computed them (analysis/cores.py): the
    # readers' CPU per sample (every stage and their overhead) and the trainer's own (v9+)
    cores: CoresNeeded | None = None
    # the repeats' 95 % intervals of the measured figures (None: one repeat, no interval)
    au_interval: tuple[float, float] | None = None
    rate_interval: tuple[float, float] | None = None
    measured_on: MeasuredOn | None = None

    @property
    def readers(self) -> int:
        return max(1, self.workers)

    @property
    def cpu_s_per_sample(self) -> float:
        return sum(self.cpu_ms.values()) / 1000.0

    @property
    def trainer_alone_rate(self) -> float | None:
        """Samples/s the trainer takes alone: its step timed alone, else its step in the cell."""
        step = self.alone_s_per_sample or self.compute_s_per_sample
        return 1.0 / step if step else None

    @property
    def consumer_rate(self) -> float | None:
        """Samples/s the consumer can take: the slower of its nominal demand and the trainer's own
        step alone (an emulated trainer whose host work per step exceeds its device time cannot
        reach its demand)."""
        rates = [r for r in (self.demand, self.trainer_alone_rate) if r]
        return min(rates) if rates else None

    def au_at(self, samples_per_s: float) -> float | None:
        """The AU this cell would show delivering ``samples_per_s``: on the summary's basis, the
        device busy per sample times the rate (without the device time, rate over demand)."""
        if self.device_s_per_sample:
            return samples_per_s * self.device_s_per_sample
        return min(1.0, samples_per_s / self.demand) if self.demand else None

    @property
    def cold(self) -> bool:
        return self.cache_achieved == "cold"


def load_cells(run_dirs: Iterable[str | Path]) -> list[CellFacts]:
    """The ok one-rank cells of ``run_dirs``, from their summaries and manifests (host, tier, dataset)."""
    cells = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise FileNotFoundError(f"--results {run_dir}: no such directory (give an iobench run directory)")
        for summary in cell_summaries(run_dir):
            # one-rank cells: a multi-rank cell's figures are its ranks' together (and, in step,
            # their waits for each other); the at-scale prediction (scale.py) covers those
            one_rank = summary.cell.run.world_size == 1
            # a cell read without decoding (MLPerf mode) has none of the CPU work the model prices
            decoded = summary.cell.loader.decode
            if summary.ok and one_rank and decoded and summary.metrics and summary.metrics.samples_per_s:
                cells.append(_facts(str(run_dir), summary, read_manifest(run_dir, summary.cell_id)))
    return cells


def _device(tier: dict) -> tuple[str, str, bool]:
    """The kind of storage under a tier's description, in words, and whether it is on loopback."""
    remote = tier.get("endpoint_url") or tier.get("conffile") or (tier.get("endpoints") or [None])[0]
    if remote:
        where = str(remote)
        loopback = any(h in where for h in ("127.0.0.1", "localhost", "[::1]"))
        return "remote", f"{tier.get('kind', 'remote')} at {where}", loopback
    storage = tier.get("storage") or {}
    if str(storage.get("fs_type") or "").lower() in SHARED_FILESYSTEMS:
        where = f"{storage.get('mount_source') or storage.get('mount_point')} ({storage['fs_type']})"
        return "pfs", f"{where}, a shared file system", False
    dev = storage.get("device") or {}
    if not dev:
        return "unknown", "storage not described", False
    raid = dev.get("raid")
    if raid:
        members = raid.get("members") or []
        transports = {m.get("transport") for m in members}
        models = sorted({m.get("model") for m in members if m.get("model")})
        kind = "nvme-raid" if transports == {"nvme"} else "disk"
        what = f"{'NVMe' if kind == 'nvme-raid' else '/'.join(sorted(t for t in transports if t))}"
        return (
            kind,
            f"{dev['name']}: {raid.get('level')} of {len(members)} {what}"
            + (f" ({', '.join(models)})" if models else ""),
            False,
        )
    transport = dev.get("transport") or "unknown"
    kind = {"nvme": "nvme", "virtio": "virtio"}.get(transport, "disk")
    words = f"{dev.get('name')}: {transport}" + (f" ({dev['model']})" if dev.get("model") else "")
    return kind, words + (" disk of a virtual machine" if kind == "virtio" else ""), False


def _interval(stability: object, name: str) -> tuple[float, float] | None:
    summary = getattr(stability, name, None) if stability is not None else None
    low, high = getattr(summary, "ci_low", None), getattr(summary, "ci_high", None)
    return (low, high) if low is not None and high is not None else None


def _facts(run: str, s: CellSummary, manifest: CellManifest | None) -> CellFacts:
    """Everything recommend reads from a cell's summary and manifest, read here and only here."""
    assert s.metrics is not None and s.verdict is not None
    m, stats = s.metrics, s.loader_stats_all_steps
    wall = {stage: s.stage_ms_per_sample.get(stage) or 0.0 for stage in STAGES}
    cpu = s.stage_cpu_ms_per_sample or wall  # an old summary without CPU times: wall stands in
    sample_bytes = (
        manifest.dataset.mean_sample_bytes
        if manifest
        else (stats.bytes_read / stats.samples if stats.samples else 0.0)
    )
    tier = manifest.tier if manifest else {}
    accelerator = s.ceilings.accelerator if s.ceilings else None
    fetch = s.ceilings.fetch if s.ceilings else None
    last = s.epochs[-1] if s.epochs else None
    per_step = m.samples / m.steps if m.steps else None
    on = None
    if manifest:
        kind, words, loopback = _device(tier)
        h = manifest.host
        on = MeasuredOn(h.hostname, h.cpu_model, h.usable_cpus, h.memory_bytes, h.cuda, kind, words, loopback)
    return CellFacts(
        run=run,
        cell_id=s.cell_id,
        tier=s.cell.tier_name,
        tier_kind=s.cell.tier_kind,
        loader=s.cell.loader.kind,
        workers=s.cell.loader.workers,
        batch_size=s.cell.loader.batch_size,
        cores_usable=manifest.host.usable_cpus if manifest else 1,
        demand=s.verdict.demand_samples_per_s or (accelerator.samples_per_s if accelerator else None),
        samples_per_s=m.samples_per_s,
        au=m.au,
        verdict=s.verdict.bound,
        cache_achieved=s.cache_state.achieved if s.cache_state else None,
        cpu_ms={stage: float(cpu.get(stage) or 0.0) for stage in STAGES},
        wall_ms=wall,
        sample_bytes=float(sample_bytes),
        dataset_bytes=float(manifest.dataset.total_bytes) if manifest else 0.0,
        fetch_ceiling_bytes_per_s=fetch.bytes_per_s if fetch else None,
        epochs=len(s.epochs) or 1,
        cache_limit_bytes=(tier.get("cache") or {}).get("limit_bytes"),
        cache_policy=(tier.get("cache") or {}).get("policy") or "lru",
        last_epoch_hit_ratio=last.cache_hit_ratio if last else None,
        request_p50_ms=stats.request_latency_ms.p50,
        request_p99_ms=stats.request_latency_ms.p99,
        throttle_bytes_per_s=(tier.get("throttle") or {}).get("bandwidth_bytes_per_s"),
        compute_s_per_sample=m.compute_s / m.samples if m.compute_s and m.samples else None,
        alone_s_per_sample=m.step_alone_s / per_step if m.step_alone_s and per_step else None,
        device_s_per_sample=m.device_busy_s / m.samples if m.device_busy_s and m.samples else None,
        cuda=bool(manifest and manifest.host.cuda),
        trainer_cpu_ms_per_sample=m.trainer_cpu_ms_per_step * m.steps / m.samples
        if m.trainer_cpu_ms_per_step is not None and m.samples
        else None,
        cores=s.verdict.cores,
        au_interval=_interval(s.stability, "au"),
        rate_interval=_interval(s.stability, "samples_per_s"),
        measured_on=on,
    )


def _cell_ref(c: CellFacts) -> str:
    return f"{c.cell_id} ({Path(c.run).name})"


@dataclass(frozen=True)
class TierFigures:
    name: str
    kind: str
    bandwidth: Figure | None  # bytes/s
    request_p50_ms: float | None
    request_p99_ms: float | None
    fetch_cpu_ms: float | None  # thread CPU per sample of the fetch stage
    measured_on: MeasuredOn | None = None  # the host and storage its cells measured


@dataclass(frozen=True)
class CacheCheck:
    cell: str
    cache_bytes: float
    dataset_bytes: float
    measured_last_epoch: float
    policy: str
    predicted: float  # the model's hit ratio for that policy, shuffled epochs


@dataclass
class Calibration:
    cells: list[CellFacts]
    collate_ms: Figure | None  # collate thread CPU per sample (decode + augment: analysis/decoderate.py)
    overhead_ms: Figure | None  # the loader's CPU per sample outside the stage timers
    # the trainer's own CPU per sample, as the cells measured it (never other processes' CPU)
    trainer_ms: Figure | None
    tiers: dict[str, TierFigures] = field(default_factory=dict)
    dali_gpu: Figure | None = None  # samples/s one GPU decoded with DALI, where a cell measured it
    dali_host_ms: Figure | None = None  # host CPU ms per sample a DALI cell on a GPU still spent
    caches: list[CacheCheck] = field(default_factory=list)
    cores: int | None = None

    def other_ms(self, fetch_cpu_ms: float = 0.0) -> float | None:
        """CPU ms per sample besides decode + augment: collate, the fetch's CPU, the loader's overhead
        and the trainer's own."""
        if self.collate_ms is None:
            return None
        extra = sum(f.value for f in (self.overhead_ms, self.trainer_ms) if f is not None)
        return self.collate_ms.value + fetch_cpu_ms + extra

    def tier_of_kind(self, kinds: tuple[str, ...]) -> TierFigures | None:
        """The measured tier of one of ``kinds`` with the highest bandwidth (exact before lower bounds)."""
        found = [(t, b) for t in self.tiers.values() if t.kind in kinds and (b := t.bandwidth) is not None]
        if not found:
            return None
        return max(found, key=lambda tb: (not tb[1].lower_bound, tb[1].value))[0]


def storage_wait_share(cell: CellFacts) -> float:
    """Share of a reader's per-sample wall time spent waiting on storage (fetch wall - fetch CPU)."""
    total = sum(cell.wall_ms.values())
    return max(0.0, cell.wall_ms["fetch"] - cell.cpu_ms["fetch"]) / total if total > 0 else 0.0


def cpu_bound(cell: CellFacts) -> bool:
    """The cell's CPU binds: the online verdict says prep and its readers waited on storage for
    less than STORAGE_WAIT_CPU_BOUND of their time. (The verdict alone names the largest stage;
    a reader whose reads overlap its decode can be slowed by the link with decode the largest.)"""
    return cell.verdict == "prep" and storage_wait_share(cell) < STORAGE_WAIT_CPU_BOUND


def overhead_of(cell: CellFacts) -> float | None:
    """CPU seconds per sample the loader's readers spent outside their stage timers: measured, the
    readers' CPU (the core budget's, analysis/cores.py) less their stage timers'; for a summary
    without a core budget, inferred from a CPU-bound cell with fewer workers than cores (its workers
    delivered ``workers / (cpu + overhead)``). None for other cells."""
    if cell.cores is not None:
        return max(0.0, cell.cores.loader_cpu_ms_per_sample / 1000.0 - cell.cpu_s_per_sample)
    if not cpu_bound(cell) or cell.samples_per_s <= 0 or cell.workers >= cell.cores_usable:
        return None
    if cell.workers >= 1:
        return cell.workers / cell.samples_per_s - cell.cpu_s_per_sample
    compute_s = 1.0 / cell.consumer_rate if cell.consumer_rate else 0.0
    return 1.0 / cell.samples_per_s - cell.cpu_s_per_sample - compute_s


def trainer_ms_of(cell: CellFacts) -> float | None:
    """The trainer's own CPU per sample (ms), as the cell measured it: its verdict's cores figure,
    else its process's CPU timer where the readers ran apart from it. Never what the host's other
    processes used."""
    if cell.cores is not None:
        return cell.cores.trainer_cpu_ms_per_sample
    return cell.trainer_cpu_ms_per_sample if cell.workers >= 1 else None


def fetch_limited(cell: CellFacts) -> bool:
    """The tier held the cell back: it is not accelerator-bound and its readers waited on storage
    for STORAGE_WAIT_CPU_BOUND of their time or more. (Measured in the cell, so another process
    taking the CPU, which slows a cell without making it wait on storage, is not mistaken for a
    slow tier.)"""
    return cell.verdict != "accelerator" and storage_wait_share(cell) >= STORAGE_WAIT_CPU_BOUND


def tier_bandwidth(cells: list[CellFacts]) -> Figure | None:
    """A tier's bandwidth from its cold cells: the best fetch ceiling; else the best rate a
    fetch-limited cell delivered (samples/s x bytes per sample); else the best any cell delivered,
    as a lower bound (the tier gave at least that; something else held the cell back)."""
    cold = [c for c in cells if c.cold and c.sample_bytes]
    ceilings = [(c.fetch_ceiling_bytes_per_s, c) for c in cold if c.fetch_ceiling_bytes_per_s]
    if ceilings:
        value, c = max(ceilings, key=lambda vc: vc[0])
        return Figure(value, f"fetch ceiling of {_cell_ref(c)}, {c.readers} reader(s)", origin="measured")
    delivered = [(c.samples_per_s * c.sample_bytes, c) for c in cold if not c.last_epoch_hit_ratio]
    limited = [(v, c) for v, c in delivered if fetch_limited(c)]
    if limited:
        value, c = max(limited, key=lambda vc: vc[0])
        return Figure(
            value, f"delivered by fetch-limited {_cell_ref(c)}, {c.readers} reader(s)", origin="measured"
        )
    if delivered:
        value, c = max(delivered, key=lambda vc: vc[0])
        return Figure(
            value,
            f"delivered by {_cell_ref(c)}, which the tier did not limit",
            lower_bound=True,
            origin="measured",
        )
    return None


def _median_figure(found: list[tuple[float, CellFacts]]) -> Figure | None:
    """The median of per-cell seconds, in ms, naming the cells (none below 0: noise)."""
    if not found:
        return None
    refs = ", ".join(_cell_ref(c) for _, c in found[:3]) + (" ..." if len(found) > 3 else "")
    return Figure(
        max(0.0, statistics.median([v for v, _ in found])) * 1000.0,
        f"median over {refs}",
        origin="measured",
    )


def dali_gpu(cells: list[CellFacts]) -> Figure | None:
    """What one GPU decoded with DALI: the best rate of a DALI cell on a CUDA host whose decode
    bound it (verdict prep); each cell drives one GPU."""
    found = [c for c in cells if c.loader == "dali" and c.cuda and c.verdict == "prep"]
    if not found:
        return None
    best = max(found, key=lambda c: c.samples_per_s)
    return Figure(
        best.samples_per_s, f"measured: DALI on the GPU, decode-bound {_cell_ref(best)}", origin="measured"
    )


def dali_host_ms(cells: list[CellFacts]) -> Figure | None:
    """The host CPU per sample DALI's GPU decode still takes: the median, over DALI cells on a CUDA
    host, of the cell process's CPU per sample (DALI's threads and the trainer's, so an upper bound
    on DALI's own; the trainer's cores are reserved apart)."""
    found = [(c, ms) for c in cells if c.loader == "dali" and c.cuda and (ms := c.trainer_cpu_ms_per_sample)]
    if not found:
        return None
    return Figure(
        statistics.median(ms for _, ms in found),
        f"measured: the process CPU per sample of {len(found)} DALI cell(s) on the GPU, median "
        f"({', '.join(_cell_ref(c) for c, _ in found[:3])}); the trainer's share included",
        origin="measured",
    )


def _prefer(cells: list[CellFacts], **match: object) -> list[CellFacts]:
    """The cells matching every key of ``match``, dropping keys from the end until some match."""
    keys = list(match)
    while keys:
        found = [c for c in cells if all(getattr(c, k) == match[k] for k in keys)]
        if found:
            return found
        keys.pop()
    return cells


def calibrate(cells: list[CellFacts], *, loader: str | None = None, batch: int | None = None) -> Calibration:
    """The recommender's inputs from ``cells``. ``loader`` and ``batch`` prefer cells of that
    loader kind and batch size for the CPU figures (per-batch overheads differ), falling back to
    all cells."""
    if not cells:
        return Calibration(cells=[], collate_ms=None, overhead_ms=None, trainer_ms=None)
    match = {k: v for k, v in (("loader", loader), ("batch_size", batch)) if v is not None}
    pool = _prefer(cells, **match)
    collate = [c.cpu_ms["collate"] for c in pool]
    collate_fig = Figure(
        statistics.median(collate), f"median collate thread CPU of {len(collate)} cell(s)", origin="measured"
    )
    overhead_fig = _median_figure([(o, c) for c in pool if (o := overhead_of(c)) is not None])
    trainer_fig = _median_figure([(t / 1000.0, c) for c in pool if (t := trainer_ms_of(c)) is not None])
    tiers = {}
    for name in dict.fromkeys(c.tier for c in cells):
        of_tier = [c for c in cells if c.tier == name]
        p50 = [c.request_p50_ms for c in of_tier if c.request_p50_ms is not None]
        p99 = [c.request_p99_ms for c in of_tier if c.request_p99_ms is not None]
        tiers[name] = TierFigures(
            name=name,
            kind=of_tier[0].tier_kind,
            bandwidth=tier_bandwidth(of_tier),
            request_p50_ms=statistics.median(p50) if p50 else None,
            request_p99_ms=statistics.median(p99) if p99 else None,
            fetch_cpu_ms=statistics.median([c.cpu_ms["fetch"] for c in of_tier]),
            measured_on=of_tier[0].measured_on,
        )
    caches = [
        CacheCheck(
            cell=_cell_ref(c),
            cache_bytes=c.cache_limit_bytes,
            dataset_bytes=c.dataset_bytes,
            measured_last_epoch=c.last_epoch_hit_ratio,
            policy=c.cache_policy,
            predicted=hit_ratio(
                c.cache_limit_bytes, c.dataset_bytes, c.cache_policy, "shuffled", epoch=c.epochs - 1
            ),
        )
        for c in cells
        if c.cache_limit_bytes and c.dataset_bytes and c.epochs >= 2 and c.last_epoch_hit_ratio is not None
    ]
    cores = max(c.cores_usable for c in cells)
    return Calibration(
        cells=cells,
        collate_ms=collate_fig,
        overhead_ms=overhead_fig,
        trainer_ms=trainer_fig,
        tiers=tiers,
        dali_gpu=dali_gpu(cells),
        dali_host_ms=dali_host_ms(cells),
        caches=caches,
        cores=cores,
    )
