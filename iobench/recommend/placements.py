"""Where the dataset could live and how it could be decoded, each option predicted for one node and
ranked.

Options: the dataset on each node's local NVMe (a RAID0 of its drives) with the page cache in
front; object storage (S3/MinIO) with the node's NVMe as a shard cache; Ceph with a RAM cache; and
every throttled "what-if" tier a sweep measured. Each is evaluated with CPU decode (the loader
workers) and with DALI decoding on the GPUs, or, for a workload read without decoding, reading only.

The model's own capacities are separate and named: the raw tier (the NVMe array, the object store,
Ceph), the cache (RAM, the NVMe) and the node's storage network. Each comes from, first found
first: the user's measured rates (``--tier-rate``, ``--rates``), a sweep's cells on this kind of
storage (``--results``), a datasheet (the NVMe drives by PCIe generation). An object store or a Ceph
cluster has no datasheet: without a rate for it, its option is *conditional* and the answer gives
the rate it would need. A published claim never stands in for a tier: it claims a tier together
with its cache at some dataset size (claims.py), and enters only where the user says it is what
they measured (a delivered rate, rates.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal

from iobench.analysis.cores import cores_to_feed
from iobench.analysis.decoderate import ASSUMED, DecodeRate
from iobench.analysis.verdict import AU_TARGET
from loaders.storage import choose_policy

from .calibrate import Calibration, Figure
from .model import (
    Prediction,
    RamPlan,
    Requirement,
    hit_ratio,
    loader_buffers,
    max_accelerators,
    mixed_rate,
    predict,
    ram_plan,
    required,
)
from .rates import Delivered, MeasuredRates

RAM_PER_READER = Figure(
    2.3e9,
    "a single-threaded buffered read from the page cache, 2.3 GB/s on one core of a 2-core cloud VM "
    "(docs/recommend.md 'Reference figures')",
    origin="reference",
)
DALI_PER_GPU = Figure(
    7000.0,
    "assumed: DALI with nvJPEG on an A100, hardware decoder taking 75 % of the images: ~7,000 images/s "
    "(NVIDIA, 'Loading Data Fast with DALI and the New Hardware JPEG Decoder in NVIDIA A100 GPUs', "
    "as read in NVIDIA/DALI#5362); taken for every GPU type",
    origin="published",
)
# when the setup is otherwise equal: the simpler one first (no extra service, no code change)
SETUP_ORDER = ("local", "object+nvme", "ceph+ram", "what-if")
Decoding = Literal["jpeg", "none"]
DECODE_ORDER = ("none", "cpu", "dali")
# the tier kinds a sweep's cells measure each setup's backend with
BACKEND_KINDS = {"local": ("local",), "object+nvme": ("s3",), "ceph+ram": ("rados", "cephfs")}
BACKEND_NAMES = {"local": "the NVMe array", "object+nvme": "the object store", "ceph+ram": "Ceph"}
RATE_KEYS = {"local": "nvme", "object+nvme": "object", "ceph+ram": "ceph"}


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
    memory_cache_bytes: float | None = None  # default: half the RAM
    dali_per_gpu: Figure | None = None  # default: measured by a sweep, else DALI_PER_GPU
    nic_bytes_per_s: float | None = None  # the node's storage network: caps a remote tier; None: not modelled
    target: str = ""  # how the node was described (given, a reference profile), for the report
    dataset_said: str = "given"  # where the dataset and sample sizes came from, for the report
    decode: DecodeRate = ASSUMED  # CPU decode + augment per core (analysis/decoderate.py)
    # host cores left to each accelerator's trainer process (accelerators/hostcost.py); None: none reserved
    trainer_cores: Figure | None = None

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
        """Cores left to the loader once the trainers have theirs (at least one)."""
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


@dataclass
class Option:
    name: str
    setup: str  # one of SETUP_ORDER
    decode: str  # cpu | dali | none (read without decoding)
    feasible: bool
    why_not: str
    cache_bytes: float
    hit_ratio: float  # steady state (epochs after the first)
    fetch_bytes_per_s: float  # one node's, effective, steady state (nan: a conditional option's)
    first_epoch_fetch_bytes_per_s: float
    prep_samples_per_s: float  # one node's
    prediction: Prediction  # one node's
    first_epoch_au: float
    cores_needed: float  # one node's
    max_accelerators: int  # on one node, at >= 90 % AU
    ram: RamPlan
    inputs: dict[str, Figure] = field(default_factory=dict)  # each model input by what it is
    # a rate the answer depends on and nobody gave: the option is ranked after the known ones and
    # its prediction assumes that rate is not the limit ('' when every rate is known)
    conditional: str = ""
    # the backend rate one node needs for AU >= 0.9 (steady state); None: the cache alone suffices
    # or prep binds below it
    backend_needed_bytes_per_s: float | None = None
    # what the cluster's nodes read from the shared backend together, steady state and epoch 1
    cluster_backend_bytes_per_s: float = 0.0
    cluster_first_epoch_backend_bytes_per_s: float = 0.0
    delivered: Delivered | None = None  # the setup's measured delivered rate used at this size
    node_accelerators: int = 1  # the accelerators of one node, which its figures are for

    JSON_DERIVED: ClassVar[tuple[str, ...]] = ("headroom", "judged", "cores_per_accelerator")

    @property
    def headroom(self) -> float:
        """The input pipeline's capacity over what the accelerators need."""
        caps = self.prediction.capacities
        return min(caps["prep"], caps["fetch"]) / caps["accelerator"]

    @property
    def judged(self) -> bool:
        """Its storage's own rates (the backend's, or the setup's as delivered) were measured or given
        here: an answer may be judged on it. A cache's read rate may be a reference figure."""
        storage = [f for name, f in self.inputs.items() if name.startswith(("backend", "delivered"))]
        return not self.conditional and bool(storage) and all(f.known for f in storage)

    @property
    def cores_per_accelerator(self) -> float:
        """Cores one accelerator needs: its share of the loader's and its trainer's."""
        return self.cores_needed / self.node_accelerators


def _from_cells(cal: Calibration | None, kinds: tuple[str, ...]) -> Figure | None:
    """The measured bandwidth of the best tier of ``kinds`` in a sweep, if one measured it."""
    tier = cal.tier_of_kind(kinds) if cal else None
    if tier is None or tier.bandwidth is None:
        return None
    f = tier.bandwidth
    where = f"tier {tier.name!r} ({tier.kind}), {f.source}"
    return replace(f, source=f"measured: {'at least ' if f.lower_bound else ''}{where}")


def _nvme(s: Scenario, cal: Calibration | None) -> Figure:
    """The node's NVMe array: given (the array, else a drive x the drives), measured by a sweep on
    this kind of storage, else the drives' datasheet. A measured lower bound (the tier never held
    a cell back) replaces the datasheet only where it is larger."""
    from .servers import nvme_read_per_device

    devices = max(1, s.nvme_devices)
    if given := s.rates.tier("nvme"):
        return given
    if each := s.rates.tier("nvme-device"):
        return replace(each, value=each.value * devices, source=f"{devices} drive(s) x {each.source}")
    sheet = s.nvme_device_rate or nvme_read_per_device(None)
    datasheet = replace(
        sheet, value=sheet.value * devices, source=f"{devices} drive(s) in RAID0 x {sheet.source}"
    )
    measured = _from_cells(cal, BACKEND_KINDS["local"])
    if measured is None:
        return datasheet
    if not measured.lower_bound or measured.value > datasheet.value:
        return measured
    return replace(datasheet, source=f"{datasheet.source}; {measured.source} (a lower bound)")


def _remote(s: Scenario, cal: Calibration | None, setup: str) -> Figure | None:
    """What one node reads from a remote tier: given, else measured by a sweep; capped by the node's
    storage network. None: nobody gave or measured it."""
    f = s.rates.tier(RATE_KEYS[setup]) or _from_cells(cal, BACKEND_KINDS[setup])
    nic = s.nic_bytes_per_s
    if f is None or nic is None or f.value <= nic:
        return f
    return replace(
        f, value=nic, source=f"{f.source}; capped by the node's storage network, {nic / 1e9:,.3g} GB/s"
    )


def _fetch_cpu_ms(cal: Calibration | None, kinds: tuple[str, ...]) -> float:
    """The fetch stage's CPU per sample on tiers of ``kinds``; where none was measured, the median
    over the measured tiers; 0 without a calibration."""
    if cal is None or not cal.tiers:
        return 0.0
    of_kind = [t.fetch_cpu_ms for t in cal.tiers.values() if t.kind in kinds and t.fetch_cpu_ms is not None]
    pool = of_kind or [t.fetch_cpu_ms for t in cal.tiers.values() if t.fetch_cpu_ms is not None]
    return sorted(pool)[len(pool) // 2] if pool else 0.0


@dataclass(frozen=True)
class _Storage:
    name: str
    setup: str
    kinds: tuple[str, ...]  # tier kinds whose cost of fetching (CPU per sample) applies
    backend: Figure | None  # None: not known (a conditional option)
    cache: Figure | None  # read bandwidth of the cache, None without one
    cache_bytes: float
    cache_in_ram: bool
    feasible: bool = True
    why_not: str = ""
    cache_policy: str = "lru"  # what the cache keeps: the kernel's page cache is an LRU


def _storages(s: Scenario, cal: Calibration | None) -> list[_Storage]:
    nvme = _nvme(s, cal)
    ram = replace(
        RAM_PER_READER,
        value=RAM_PER_READER.value * s.cores,
        source=f"{RAM_PER_READER.value / 1e9:.1f} GB/s per reader x {s.cores} cores: {RAM_PER_READER.source}",
    )
    fits = s.nvme_bytes >= s.dataset_bytes
    out = [
        _Storage(
            "local NVMe",
            "local",
            BACKEND_KINDS["local"],
            nvme,
            ram,  # the page cache
            min(s.memory_cache, s.dataset_bytes),
            cache_in_ram=True,
            feasible=fits,
            why_not=""
            if fits
            else f"the dataset is larger than a node's NVMe ({s.nvme_bytes / 1e12:.2f} TB)",
        ),
        _Storage(
            "object store + NVMe cache",
            "object+nvme",
            ("s3",),
            _remote(s, cal, "object+nvme"),
            nvme if s.nvme_bytes else None,
            s.nvme_bytes,
            cache_in_ram=False,
            cache_policy=choose_policy(s.cache_policy, int(s.nvme_bytes), int(s.dataset_bytes)),
        ),
        _Storage(
            "Ceph + RAM cache",
            "ceph+ram",
            BACKEND_KINDS["ceph+ram"],
            _remote(s, cal, "ceph+ram"),
            ram,
            min(s.memory_cache, s.dataset_bytes),
            cache_in_ram=True,
            cache_policy=choose_policy(s.cache_policy, int(s.memory_cache), int(s.dataset_bytes)),
        ),
    ]
    for tier in cal.tiers.values() if cal else []:
        if tier.kind == "throttled" and tier.bandwidth is not None:
            f = tier.bandwidth
            source = (
                f"measured: {'at least ' if f.lower_bound else ''}tier {tier.name!r} (throttled), {f.source}"
            )
            out.append(
                _Storage(
                    f"what-if {tier.name}",
                    "what-if",
                    ("throttled",),
                    replace(f, source=source),
                    None,
                    0.0,
                    False,
                )
            )
    return out


def _cpu_parts(cal: Calibration, fetch_cpu_ms: float) -> str:
    parts = [f"{cal.collate_ms.value:.2f} ms collate ({cal.collate_ms.source})"]  # type: ignore[union-attr]
    parts.append(f"{fetch_cpu_ms:.2f} ms fetch")
    for name, f in (("loader overhead", cal.overhead_ms), ("the trainer's own", cal.trainer_ms)):
        parts.append(f"{f.value:.2f} ms {name} ({f.source})" if f else f"{name} not measured: 0")
    return " + ".join(parts)


def backend_needed(target_bytes: float, hit: float, cache_bytes_per_s: float | None) -> float | None:
    """The backend rate at which a cache serving ``hit`` of the reads at ``cache_bytes_per_s`` and the
    backend the rest deliver ``target_bytes`` (mixed_rate solved for the backend); None when the
    cache alone delivers it."""
    spare = 1.0 / target_bytes - (hit / cache_bytes_per_s if hit and cache_bytes_per_s else 0.0)
    if hit >= 1.0 or spare <= 0:
        return None
    return (1.0 - hit) / spare


def _reading_ms(s: Scenario, cal: Calibration | None, fetch_cpu_ms: float) -> Figure:
    """CPU per sample to read a sample's bytes without decoding them: the fetch stage a sweep
    measured, else the bytes copied at the page-cache read rate of one core."""
    if cal is not None and fetch_cpu_ms:
        return Figure(
            fetch_cpu_ms, "measured: the fetch stage's thread CPU per sample of --results", origin="measured"
        )
    return Figure(
        1000.0 * s.sample_bytes / RAM_PER_READER.value,
        f"the sample's bytes copied at {RAM_PER_READER.value / 1e9:.1f} GB/s per core: {RAM_PER_READER.source}",
        origin="reference",
    )


def _option(s: Scenario, st: _Storage, decode: str, cal: Calibration | None) -> Option:
    req = s.requirement
    cache_bytes = st.cache_bytes if st.cache is not None else 0.0
    hit = hit_ratio(cache_bytes, s.dataset_bytes, st.cache_policy, s.access, epoch=1)
    inputs: dict[str, Figure] = {"demand per accelerator (samples/s)": s.per_accelerator}
    delivered, fetch_bytes, first_fetch_bytes, conditional = _fetch(s, st, hit, inputs)
    fetch = fetch_bytes / s.sample_bytes
    prep, cores, workers = _prep(s, decode, cal, _fetch_cpu_ms(cal, st.kinds), inputs)
    p = predict({"prep": prep, "fetch": fetch}, req.samples_per_s)
    first = predict({"prep": prep, "fetch": first_fetch_bytes / s.sample_bytes}, req.samples_per_s)
    needed = None
    if conditional:
        # the backend rate one node needs for AU >= 0.9, where prep allows it
        target = AU_TARGET * req.samples_per_s
        if prep >= target:
            needed = backend_needed(target * s.sample_bytes, hit, st.cache.value if st.cache else None)
    buffers = loader_buffers(workers, s.prefetch, s.batch, s.decoded_sample_bytes)
    plan = ram_plan(
        ram_bytes=s.ram_bytes,
        buffers_bytes=buffers,
        cache_bytes=cache_bytes if st.cache_in_ram else 0.0,
        accelerator_memory_bytes=s.accelerator_memory_bytes * s.node_accelerators
        if s.accelerator_memory_bytes
        else None,
    )
    from_backend = 1.0 - (hit if delivered is None else 0.0)
    return Option(
        name=st.name,
        setup=st.setup,
        decode=decode,
        feasible=st.feasible,
        why_not=st.why_not,
        cache_bytes=cache_bytes,
        hit_ratio=hit,
        fetch_bytes_per_s=math.nan if conditional else fetch_bytes,  # nan: the backend's rate is not known
        first_epoch_fetch_bytes_per_s=first_fetch_bytes,
        prep_samples_per_s=prep,
        prediction=p,
        first_epoch_au=first.au if math.isfinite(first_fetch_bytes) else math.nan,  # nan: backend not known
        cores_needed=cores,
        max_accelerators=max_accelerators(min(prep, fetch), s.per_accelerator.value),
        ram=plan,
        inputs=inputs,
        conditional=conditional,
        backend_needed_bytes_per_s=needed,
        cluster_backend_bytes_per_s=s.nodes * from_backend * p.samples_per_s * s.sample_bytes,
        cluster_first_epoch_backend_bytes_per_s=s.nodes * first.samples_per_s * s.sample_bytes
        if math.isfinite(first_fetch_bytes)
        else math.nan,
        delivered=delivered,
        node_accelerators=s.node_accelerators,
    )


def _fetch(
    s: Scenario, st: _Storage, hit: float, inputs: dict[str, Figure]
) -> tuple[Delivered | None, float, float, str]:
    """What one node reads from a setup, steady and in epoch 1 (bytes/s), with the setup's rate as
    measured where the user gave it, and what keeps the answer conditional ('' when nothing); each
    figure used is added to ``inputs``."""
    delivered = s.rates.delivered_for(st.setup, s.dataset_bytes)
    conditional = ""
    if delivered is not None:  # the whole setup as measured at this size: its cache included
        fetch_bytes = first_fetch_bytes = delivered.rate.value
        inputs[f"delivered by the setup at {delivered.sizes()} (bytes/s)"] = delivered.rate
    else:
        backend = st.backend
        if backend is None:
            key = RATE_KEYS.get(st.setup, "")
            missing = (
                f"{BACKEND_NAMES.get(st.setup, 'its backend')}'s rate is not known: give --tier-rate {key}=RATE "
                f"(or a {'warp' if key == 'object' else 'rados bench' if key == 'ceph' else 'fio'} JSON file), "
                "or --results of a sweep on it"
            )
            # a cache that holds the dataset serves every read after epoch 1: only epoch 1 needs the rate
            holds = st.cache is not None and hit >= 1.0
            conditional = "" if holds else missing
            backend = Figure(
                math.inf,
                f"not known, read in epoch 1 only (the cache holds the dataset): {missing}"
                if holds
                else missing,
            )
        inputs["backend bandwidth (bytes/s)"] = backend
        if st.cache is not None:
            inputs["cache read bandwidth (bytes/s)"] = st.cache
        fetch_bytes = backend.value if st.cache is None else mixed_rate(hit, st.cache.value, backend.value)
        first_fetch_bytes = backend.value
    return delivered, fetch_bytes, first_fetch_bytes, conditional


def _prep(
    s: Scenario, decode: str, cal: Calibration | None, fetch_cpu: float, inputs: dict[str, Figure]
) -> tuple[float, float, float]:
    """What one node's CPU (or its GPUs, decoding with DALI) prepares (samples/s), the cores feeding
    the demand takes and the loader's workers; each figure used is added to ``inputs``."""
    req = s.requirement
    other = cal.other_ms(fetch_cpu) if cal is not None else None
    if other is not None:
        assert cal is not None and cal.collate_ms is not None
        other_fig = Figure(other, f"measured: {_cpu_parts(cal, fetch_cpu)}", origin="measured")
        host_ms = other - cal.collate_ms.value  # with DALI the GPU decodes, augments and batches
    else:
        other = host_ms = 0.0
        other_fig = Figure(
            0.0, "not measured (no --results): collate, fetch, loader and training process taken as 0"
        )
    if s.trainer_cores:
        inputs["host cores kept per accelerator for its trainer"] = s.trainer_cores
    if decode == "none":  # read without decoding: reading the bytes is the CPU work
        reading = _reading_ms(s, cal, fetch_cpu)
        inputs["CPU to read a sample, no decoding (ms per sample)"] = reading
        cpu_ms = reading.value + other - fetch_cpu  # the rest a sweep measured: collate, overhead, trainer
        prep = s.loader_cores * 1000.0 / cpu_ms
        cores = cores_to_feed(req.samples_per_s, cpu_ms, s.reserved_cores)
        workers = min(s.loader_cores, max(1, math.ceil(cores - s.reserved_cores)))
    elif decode == "cpu":
        cpu_ms = s.decode.ms_per_sample(s.sample_bytes) + other
        rate = Figure(
            s.decode.per_core(s.sample_bytes), s.decode.describe(s.sample_bytes), origin=_origin(s.decode)
        )
        inputs["CPU decode+augment per core (samples/s)"] = rate
        prep = s.loader_cores * 1000.0 / cpu_ms
        cores = cores_to_feed(req.samples_per_s, cpu_ms, s.reserved_cores)
        workers = min(s.loader_cores, max(1, math.ceil(cores - s.reserved_cores)))
    else:
        dali = s.dali_per_gpu or (cal.dali_gpu if cal else None) or DALI_PER_GPU
        inputs["DALI decode per GPU (samples/s)"] = dali
        dali_host = cal.dali_host_ms if cal else None
        inputs["host CPU of DALI's GPU decode (ms per sample)"] = dali_host or Figure(
            0.0,
            "not measured (no DALI cell on a GPU in --results): taken as 0, though NVIDIA/DALI#5274 "
            "saw a mixed-decode pipeline keep ~24 cores busy",
        )
        host_ms += dali_host.value if dali_host else 0.0
        gpu = s.node_accelerators * dali.value
        prep = min(gpu, s.loader_cores / (host_ms / 1000.0)) if host_ms > 0 else gpu
        cores = cores_to_feed(req.samples_per_s, host_ms, s.reserved_cores)
        workers = s.node_accelerators  # one DALI pipeline per GPU
    if decode != "none":
        inputs["other CPU per sample (ms)"] = other_fig
    return prep, cores, workers


def _origin(rate: DecodeRate) -> str:
    """A decode rate's kind as a figure's origin."""
    return {"given": "given", "run": "measured", "calibration": "measured"}.get(rate.kind, "reference")


def rank_key(o: Option) -> tuple:
    """Feasible first; then options whose every rate is known before conditional ones; then higher
    predicted AU. Among options that feed the demand (AU 1.00) the simpler setup comes first (a
    margin beyond the demand buys nothing the job can use); among those that do not, more input
    headroom. Then the simpler setup, and reading only or CPU decode (no code change) before DALI.
    AU and headroom are compared to 2 decimals: closer than that the model cannot tell them apart."""
    au = round(o.prediction.au or 0.0, 2)
    fed = au >= 1.0
    return (
        not o.feasible,
        bool(o.conditional),
        -au,
        SETUP_ORDER.index(o.setup) if fed else 0,
        -round(o.headroom, 2),
        SETUP_ORDER.index(o.setup),
        DECODE_ORDER.index(o.decode),
    )


def decodes(s: Scenario) -> tuple[str, ...]:
    return ("none",) if s.decoding == "none" else ("cpu", "dali")


def options(s: Scenario, cal: Calibration | None) -> list[Option]:
    """Every option for ``s``, best first (:func:`rank_key`)."""
    found = [_option(s, st, d, cal) for st in _storages(s, cal) for d in decodes(s)]
    return sorted(found, key=rank_key)
