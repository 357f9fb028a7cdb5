"""Where the dataset could live and how it could be decoded, each option predicted and ranked.

Options: the dataset on local NVMe (RAID0 of the given devices); object storage (S3/MinIO) with
the local NVMe as an LRU shard cache; Ceph with a RAM cache; and every throttled "what-if" tier a
sweep measured. Each is evaluated with CPU decode (the loader workers) and with DALI decoding on
the GPUs. Every capacity comes from the sweep's calibration where a cell measured that kind of
tier, else from a published figure, stated as an assumption with its source.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from iobench.analysis.decoderate import ASSUMED, DecodeRate
from loaders.storage import choose_policy

from .calibrate import Calibration, Figure
from .model import (
    Prediction,
    RamPlan,
    Requirement,
    cores_needed,
    hit_ratio,
    loader_buffers,
    max_accelerators,
    mixed_rate,
    predict,
    ram_plan,
    required,
)

CLAIMS = "docs/recommend.md 'Published claims' (a vendor-style write-up: a hypothesis)"
NVME_PER_DEVICE = Figure(3e9, f"~3 GB/s per device, from 4 x NVMe RAID0 ~ 12 GB/s: {CLAIMS}")
OBJECT_STORE = Figure(8e9, f"2 x NVMe cache + object storage ~ 8 GB/s: {CLAIMS}")
CEPH = Figure(5e9, f"Ceph + memory cache ~ 5 GB/s: {CLAIMS}")
RAM_PER_READER = Figure(
    2.3e9,
    "a single-threaded buffered read from the page cache, 2.3 GB/s on one core of a 2-core cloud VM "
    "(docs/recommend.md 'Reference figures')",
)
DALI_PER_GPU = Figure(
    7000.0,
    "assumed: DALI with nvJPEG on an A100, hardware decoder taking 75 % of the images: ~7,000 images/s "
    "(NVIDIA, 'Loading Data Fast with DALI and the New Hardware JPEG Decoder in NVIDIA A100 GPUs', "
    "as read in NVIDIA/DALI issue #5362); taken for every GPU type",
)
# when the setup is otherwise equal: the simpler one first (no extra service, no code change)
SETUP_ORDER = ("local", "object+nvme", "ceph+ram", "what-if")


@dataclass(frozen=True)
class Scenario:
    dataset_bytes: float
    sample_bytes: float
    accelerators: int
    accelerator: str
    per_accelerator: Figure  # samples/s each
    accelerator_memory_bytes: float | None  # each
    nvme_devices: int
    nvme_bytes: float  # all devices together
    ram_bytes: float
    cores: int
    cache_policy: str = "auto"  # iobench's shard caches: auto (as the tiers choose), lru or static
    access: str = "shuffled"
    batch: int = 256
    prefetch: int = 2
    decoded_sample_bytes: float = 1e6
    memory_cache_bytes: float | None = None  # default: half the RAM
    dali_per_gpu: Figure | None = None  # default: measured by a sweep, else DALI_PER_GPU
    nic_bytes_per_s: float | None = None  # the storage network: caps a remote tier; None: not modelled
    target: str = ""  # how the server was described (given, a reference profile), for the report
    decode: DecodeRate = ASSUMED  # CPU decode + augment per core (analysis/decoderate.py)
    # host cores left to each accelerator's trainer process (cell/hostcost.py); None: none reserved
    trainer_cores: Figure | None = None

    @property
    def reserved_cores(self) -> int:
        """Cores the accelerators' trainers keep: none of the loader's work runs there."""
        return int(self.trainer_cores.value) * self.accelerators if self.trainer_cores else 0

    @property
    def loader_cores(self) -> int:
        """Cores left to the loader once the trainers have theirs (at least one)."""
        return max(1, self.cores - self.reserved_cores)

    @property
    def requirement(self) -> Requirement:
        return required(self.accelerators, self.per_accelerator.value, self.sample_bytes)

    @property
    def memory_cache(self) -> float:
        return self.memory_cache_bytes if self.memory_cache_bytes is not None else self.ram_bytes / 2


@dataclass
class Option:
    name: str
    setup: str  # one of SETUP_ORDER
    decode: str  # cpu | dali
    feasible: bool
    why_not: str
    cache_bytes: float
    hit_ratio: float  # steady state (epochs after the first)
    fetch_bytes_per_s: float  # effective, steady state
    first_epoch_fetch_bytes_per_s: float
    prep_samples_per_s: float
    prediction: Prediction
    first_epoch_au: float
    cores_needed: float
    max_accelerators: int
    ram: RamPlan
    inputs: list[tuple[str, Figure]] = field(default_factory=list)

    @property
    def headroom(self) -> float:
        """The input pipeline's capacity over what the accelerators need."""
        caps = self.prediction.capacities
        return min(caps["prep"], caps["fetch"]) / caps["accelerator"]

    def as_dict(self) -> dict:
        out = asdict(self)
        out["inputs"] = [{"input": k, **f.as_dict()} for k, f in self.inputs]
        out["headroom"] = self.headroom
        return out


def _bandwidth(cal: Calibration | None, kinds: tuple[str, ...], assumed: Figure) -> Figure:
    """The measured bandwidth of the best tier of ``kinds``, else ``assumed``. A measured lower
    bound (the tier was never the limit) only replaces an assumption smaller than itself."""
    tier = cal.tier_of_kind(kinds) if cal else None
    if tier is None or tier.bandwidth is None:
        return replace(assumed, source=f"assumed: {assumed.source}")
    f = tier.bandwidth
    where = f"tier {tier.name!r} ({tier.kind}), {f.source}"
    if not f.lower_bound:
        return Figure(f.value, f"measured: {where}")
    if f.value > assumed.value:
        return Figure(
            f.value, f"measured: at least {f.value / 1e9:.3g} GB/s, more than assumed: {where}", True
        )
    return replace(
        assumed,
        source=f"assumed: {assumed.source}; the sweep showed at least {f.value / 1e9:.3g} GB/s: {where}",
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
    backend: Figure
    cache: Figure | None  # read bandwidth of the cache, None without one
    cache_bytes: float
    cache_in_ram: bool
    feasible: bool = True
    why_not: str = ""
    cache_policy: str = "lru"  # what the cache keeps: the kernel's page cache is an LRU


def _storages(s: Scenario, cal: Calibration | None) -> list[_Storage]:
    devices = max(1, s.nvme_devices)
    nvme = _bandwidth(
        cal,
        ("local",),
        Figure(NVME_PER_DEVICE.value * devices, f"{devices} device(s) at {NVME_PER_DEVICE.source}"),
    )
    ram = replace(
        RAM_PER_READER,
        value=RAM_PER_READER.value * s.cores,
        source=f"assumed {RAM_PER_READER.value / 1e9:.1f} GB/s per reader x {s.cores} cores: {RAM_PER_READER.source}",
    )
    out = [
        _Storage(
            "local NVMe",
            "local",
            ("local",),
            nvme,
            ram,  # the page cache
            min(s.memory_cache, s.dataset_bytes),
            cache_in_ram=True,
            feasible=s.nvme_bytes >= s.dataset_bytes,
            why_not=""
            if s.nvme_bytes >= s.dataset_bytes
            else f"the dataset ({s.dataset_bytes / 1e12:.2f} TB) does not fit the NVMe ({s.nvme_bytes / 1e12:.2f} TB)",
        ),
        _Storage(
            "object store + NVMe cache",
            "object+nvme",
            ("s3",),
            _remote(_bandwidth(cal, ("s3",), OBJECT_STORE), s),
            nvme if s.nvme_bytes else None,
            s.nvme_bytes,
            cache_in_ram=False,
            cache_policy=choose_policy(s.cache_policy, int(s.nvme_bytes), int(s.dataset_bytes)),
        ),
        _Storage(
            "Ceph + RAM cache",
            "ceph+ram",
            ("rados", "cephfs"),
            _remote(_bandwidth(cal, ("rados", "cephfs"), CEPH), s),
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
                    Figure(f.value, source),
                    None,
                    0.0,
                    False,
                )
            )
    return out


def _cpu_parts(cal: Calibration, fetch_cpu_ms: float) -> str:
    parts = [f"{cal.collate_ms.value:.2f} ms collate ({cal.collate_ms.source})"]  # type: ignore[union-attr]
    parts.append(f"{fetch_cpu_ms:.2f} ms fetch")
    for name, f in (("loader overhead", cal.overhead_ms), ("training process", cal.main_ms)):
        parts.append(f"{f.value:.2f} ms {name} ({f.source})" if f else f"{name} not measured: 0")
    return " + ".join(parts)


def _remote(backend: Figure, s: Scenario) -> Figure:
    """A remote tier's bandwidth, capped by the target's storage network."""
    nic = s.nic_bytes_per_s
    if nic is None or backend.value <= nic:
        return backend
    return Figure(nic, f"{backend.source}; capped by the server's storage network, {nic / 1e9:,.3g} GB/s")


def _option(s: Scenario, st: _Storage, decode: str, cal: Calibration | None) -> Option:
    req = s.requirement
    cache_bytes = st.cache_bytes if st.cache is not None else 0.0
    hit = hit_ratio(cache_bytes, s.dataset_bytes, st.cache_policy, s.access, epoch=1)
    fetch_bytes = st.backend.value if st.cache is None else mixed_rate(hit, st.cache.value, st.backend.value)
    fetch = fetch_bytes / s.sample_bytes
    fetch_cpu = _fetch_cpu_ms(cal, st.kinds)
    inputs: list[tuple[str, Figure]] = [
        ("demand per accelerator (samples/s)", s.per_accelerator),
        ("backend bandwidth (bytes/s)", st.backend),
    ]
    if st.cache is not None:
        inputs.append(("cache read bandwidth (bytes/s)", st.cache))
    # decode + augment: one rate per host, at this scenario's sample size; the rest of the CPU a
    # sample takes is measured by a sweep or, without one, left out (the cores are then a floor)
    decode_ms = s.decode.ms_per_sample(s.sample_bytes)
    other = cal.other_ms(fetch_cpu) if cal is not None else None
    if other is not None:
        assert cal is not None and cal.collate_ms is not None
        other_fig = Figure(other, f"measured: {_cpu_parts(cal, fetch_cpu)}")
        host_ms = other - cal.collate_ms.value  # with DALI the GPU decodes, augments and batches
    else:
        other = host_ms = 0.0
        other_fig = Figure(
            0.0, "not measured (no --results): collate, fetch, loader and training process taken as 0"
        )
    if s.trainer_cores:
        inputs.append(("host cores kept per accelerator for its trainer", s.trainer_cores))
    cpu_ms = decode_ms + other
    if decode == "cpu":
        rate = Figure(s.decode.per_core(s.sample_bytes), s.decode.describe(s.sample_bytes))
        inputs.append(("CPU decode+augment per core (samples/s)", rate))
        prep = s.loader_cores * 1000.0 / cpu_ms
        cores = cores_needed(req.samples_per_s, cpu_ms / 1000.0) + s.reserved_cores
        workers = min(s.loader_cores, max(1, math.ceil(cores - s.reserved_cores)))
    else:
        dali = s.dali_per_gpu or (cal.dali_gpu if cal else None) or DALI_PER_GPU
        inputs.append(("DALI decode per GPU (samples/s)", dali))
        dali_host = cal.dali_host_ms if cal else None
        inputs.append(
            (
                "host CPU of DALI's GPU decode (ms per sample)",
                dali_host
                or Figure(
                    0.0,
                    "not measured (no DALI cell on a GPU in --results): taken as 0, though NVIDIA/DALI#5274 "
                    "saw a mixed-decode pipeline keep ~24 cores busy",
                ),
            )
        )
        host_ms += dali_host.value if dali_host else 0.0
        gpu = s.accelerators * dali.value
        prep = min(gpu, s.loader_cores / (host_ms / 1000.0)) if host_ms > 0 else gpu
        cores = cores_needed(req.samples_per_s, host_ms / 1000.0) + s.reserved_cores
        workers = s.accelerators  # one DALI pipeline per GPU
    inputs.append(("other CPU per sample (ms)", other_fig))
    p = predict({"prep": prep, "fetch": fetch}, req.samples_per_s)
    first_fetch_bytes = st.backend.value
    first = predict({"prep": prep, "fetch": first_fetch_bytes / s.sample_bytes}, req.samples_per_s)
    buffers = loader_buffers(workers, s.prefetch, s.batch, s.decoded_sample_bytes)
    plan = ram_plan(
        ram_bytes=s.ram_bytes,
        buffers_bytes=buffers,
        cache_bytes=cache_bytes if st.cache_in_ram else 0.0,
        accelerator_memory_bytes=s.accelerator_memory_bytes * s.accelerators
        if s.accelerator_memory_bytes
        else None,
    )
    return Option(
        name=st.name,
        setup=st.setup,
        decode=decode,
        feasible=st.feasible,
        why_not=st.why_not,
        cache_bytes=cache_bytes,
        hit_ratio=hit,
        fetch_bytes_per_s=fetch_bytes,
        first_epoch_fetch_bytes_per_s=first_fetch_bytes,
        prep_samples_per_s=prep,
        prediction=p,
        first_epoch_au=first.au or 0.0,
        cores_needed=cores,
        max_accelerators=max_accelerators(min(prep, fetch), s.per_accelerator.value),
        ram=plan,
        inputs=inputs,
    )


def rank_key(o: Option) -> tuple:
    """Feasible first; then higher predicted AU, more input headroom, the simpler setup, CPU decode
    (no code change) before DALI. AU and headroom are compared to 3 decimals: closer than that
    the model cannot tell options apart."""
    return (
        not o.feasible,
        -round(o.prediction.au or 0.0, 3),
        -round(o.headroom, 3),
        SETUP_ORDER.index(o.setup),
        o.decode != "cpu",
    )


def options(s: Scenario, cal: Calibration | None) -> list[Option]:
    """Every option for ``s``, best first (:func:`rank_key`)."""
    found = [_option(s, st, d, cal) for st in _storages(s, cal) for d in ("cpu", "dali")]
    return sorted(found, key=rank_key)
