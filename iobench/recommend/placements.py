"""The options: each place the dataset can live (storages.py) with each way to decode it, predicted
for one node, checked against the node (feasible: its NVMe, RAM and cores hold it), and ranked.

Each storage is evaluated with CPU decode (the loader workers) and, on NVIDIA GPUs, with DALI
decoding on the GPUs, or, for a workload read without decoding, reading only. A cache in front of a
backend is priced with the mix rule the lab measured (mixrule.py), the other rule's figure kept as
the far end of a range. An option whose backend rate nobody gave is *conditional*: ranked after the
known ones, its AU an upper bound, with the rate it would need. A published claim never stands in
for a tier (claims.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

from iobench.analysis.cores import cores_to_feed
from iobench.analysis.decoderate import DecodeRate
from iobench.analysis.verdict import AU_TARGET

from .calibrate import Calibration, Figure, Origin
from .model import (
    Prediction,
    RamPlan,
    hit_ratio,
    loader_buffers,
    max_accelerators,
    predict,
    ram_plan,
)
from .rates import Delivered, Setup
from .scenario import Scenario
from .staging import Staging
from .storages import (
    BACKEND_NAMES,
    BENCHMARKS,
    HARDWARE,
    RAM_PER_READER,
    SETUP_ORDER,
    Storage,
    storages,
)

DALI_PER_GPU = Figure(
    7000.0,
    "about 7,000 images/s on one A100 with nvJPEG's hardware decoder taking 75 % of the images (NVIDIA, "
    "'Loading Data Fast with DALI and the New Hardware JPEG Decoder in NVIDIA A100 GPUs', as quoted in "
    "NVIDIA/DALI#5362): an A100 figure taken for every NVIDIA GPU; measure yours (--dali-per-gpu)",
    origin="published",
)
DECODE_ORDER = ("none", "cpu", "dali")


@dataclass
class PlacementOption:
    name: str
    setup: Setup
    decode: str  # cpu | dali | none (read without decoding)
    feasible: bool
    why_not: str  # every shortfall, joined ('' when feasible)
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
    # the backend rate one node needs for AU >= 0.9 (steady state) under the mix rule, and the
    # range the two rules give; None: the cache alone suffices, or prep binds below it
    backend_needed_bytes_per_s: float | None = None
    backend_needed_range: tuple[float, float] | None = None
    # what the cluster's nodes read from the shared backend together, steady state and epoch 1
    cluster_backend_bytes_per_s: float = 0.0
    cluster_first_epoch_backend_bytes_per_s: float = 0.0
    delivered: Delivered | None = None  # the setup's measured delivered rate used at this size
    node_accelerators: int = 1  # the accelerators of one node, which its figures are for
    shortfalls: tuple[str, ...] = ()  # what of the node does not hold it: capacity, RAM, cores
    au_range: tuple[float, float] | None = None  # AU under each mix rule where they differ
    rate_key: str = ""  # the --tier-rate key of its backend
    remote_bytes_per_s: float = 0.0  # what it reads over the node's storage network, steady state
    staging: Staging | None = None  # the copy it needs before training
    node_cores: int = 0  # the node's, for the cores it leaves

    JSON_DERIVED: ClassVar[tuple[str, ...]] = ("headroom", "judged", "cores_per_accelerator", "label")

    @property
    def label(self) -> str:
        how = {"cpu": "CPU decode", "dali": "DALI decode", "none": "read without decoding"}[self.decode]
        return f"{self.name}, {how}"

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

    @property
    def reaches(self) -> bool:
        """Feasible, every rate known, and at or above the target AU."""
        return self.feasible and not self.conditional and (self.prediction.au or 0.0) >= AU_TARGET - 5e-3


def _fetch_cpu_ms(cal: Calibration | None, kinds: tuple[str, ...]) -> float:
    """The fetch stage's CPU per sample on tiers of ``kinds``; where none was measured, the median
    over the measured tiers; 0 without a calibration."""
    if cal is None or not cal.tiers:
        return 0.0
    of_kind = [t.fetch_cpu_ms for t in cal.tiers.values() if t.kind in kinds and t.fetch_cpu_ms is not None]
    pool = of_kind or [t.fetch_cpu_ms for t in cal.tiers.values() if t.fetch_cpu_ms is not None]
    return sorted(pool)[len(pool) // 2] if pool else 0.0


def _cpu_parts(cal: Calibration, collate_ms: Figure, fetch_cpu_ms: float) -> str:
    parts = [f"{collate_ms.value:.2f} ms collate ({collate_ms.source})"]
    parts.append(f"{fetch_cpu_ms:.2f} ms fetch")
    for name, f in (("loader overhead", cal.overhead_ms), ("the trainer's own", cal.trainer_ms)):
        parts.append(f"{f.value:.2f} ms {name} ({f.source})" if f else f"{name} not measured: 0")
    return " + ".join(parts)


def _reading_ms(s: Scenario, cal: Calibration | None, fetch_cpu_ms: float) -> Figure:
    """CPU per sample to read a sample's bytes without decoding them: the fetch stage a sweep
    measured; else the larger of the bytes copied at the page-cache read rate of one core and what
    the model's own benchmark submitters measured (configs/accelerators.yaml's read_cpu)."""
    if cal is not None and fetch_cpu_ms:
        return Figure(
            fetch_cpu_ms, "measured: the fetch stage's thread CPU per sample of --results", origin="measured"
        )
    copy = 1000.0 * s.sample_bytes / RAM_PER_READER.value
    if s.read_cpu is not None and s.read_cpu.ms_per_sample > copy:
        r = s.read_cpu
        return Figure(
            r.ms_per_sample,
            f"{r.cores_per_accelerator:g} core per {r.accelerator.upper()} at its demand, as MLPerf Storage's "
            f"submitters measured it ({r.source}); the bytes' copy alone would take {copy:.2f} ms",
            origin=r.origin,
        )
    return Figure(
        copy,
        f"the sample's bytes copied at {RAM_PER_READER.value / 1e9:.1f} GB/s per core: {RAM_PER_READER.source}",
        origin="reference",
    )


def _unknown_rate(st: Storage) -> str:
    key = st.key
    return (
        f"{BACKEND_NAMES.get(key, 'its backend')}'s rate is not known: give --tier-rate {key}=RATE "
        f"(or a {BENCHMARKS.get(key, 'benchmark')} JSON file), or --results of a sweep on it"
    )


@dataclass(frozen=True)
class _Fetch:
    """What one node reads from a setup (bytes/s): steady state, its range under the two mix rules,
    epoch 1, and what keeps the answer conditional ('' when nothing)."""

    steady: float
    low: float
    high: float
    first: float
    conditional: str = ""
    delivered: Delivered | None = None


def _fetch(s: Scenario, st: Storage, hit: float, inputs: dict[str, Figure]) -> _Fetch:
    """The setup's rate as measured where the user gave it (a delivered rate at this size), else its
    cache and backend mixed; each figure used is added to ``inputs``."""
    delivered = s.rates.delivered_for(st.setup, s.dataset_bytes)
    if delivered is not None:  # the whole setup as measured at this size: its cache included
        inputs[f"delivered by the setup at {delivered.sizes()} (bytes/s)"] = delivered.rate
        v = delivered.rate.value
        return _Fetch(v, v, v, v, delivered=delivered)
    backend, conditional = st.backend, ""
    if backend is None:
        missing = _unknown_rate(st)
        # a cache that holds the dataset serves every read after epoch 1: only epoch 1 needs the rate
        holds = st.cache is not None and hit >= 1.0
        conditional = "" if holds else missing
        said = (
            f"not known, read in epoch 1 only (the cache holds the dataset): {missing}" if holds else missing
        )
        backend = Figure(math.inf, said)
    inputs["backend bandwidth (bytes/s)"] = backend
    if st.cache is None:
        return _Fetch(backend.value, backend.value, backend.value, backend.value, conditional)
    inputs["cache read bandwidth (bytes/s)"] = st.cache
    low, high = s.mix.range(hit, st.cache.value, backend.value)
    steady = s.mix.rate(hit, st.cache.value, backend.value)
    return _Fetch(steady, low, high, backend.value, conditional)


def _shortfalls(s: Scenario, st: Storage, buffers: float) -> list[str]:
    """What of the node does not hold the option: its capacity, its RAM (the loader's buffers, and
    a memory cache the user sized), its cores (the trainers' and at least one for the loader)."""
    out = [st.capacity_short] if st.capacity_short else []
    given_cache = st.cache_bytes if st.cache_in_ram and s.memory_cache_bytes is not None else 0.0
    if buffers + given_cache > s.ram_bytes:
        cache = f" and the {s.units.size(given_cache)} memory cache given" if given_cache else ""
        out.append(
            f"RAM: the loader's buffers take {s.units.size(buffers)}{cache}; the node has {s.units.size(s.ram_bytes)}"
        )
    if s.reserved_cores + 1 > s.cores:
        out.append(
            f"cores: the {s.node_accelerators} trainers keep {s.reserved_cores} and the loader needs at least "
            f"one; the node has {s.cores}"
        )
    return out


def _needed(s: Scenario, st: Storage, hit: float, prep: float) -> tuple[float | None, tuple | None]:
    """The backend rate one node needs for AU >= 0.9, where prep allows it: under the mix rule and
    the range of the two rules."""
    target = AU_TARGET * s.requirement.samples_per_s
    if prep < target:
        return None, None
    cache = st.cache.value if st.cache else None
    at = target * s.sample_bytes
    return s.mix.needed(at, hit, cache), s.mix.needed_range(at, hit, cache)


def _option(s: Scenario, st: Storage, decode: str, cal: Calibration | None) -> PlacementOption:
    req = s.requirement
    inputs: dict[str, Figure] = {"demand per accelerator (samples/s)": s.per_accelerator}
    prep, cores, workers = _prep(s, decode, cal, _fetch_cpu_ms(cal, st.kinds), inputs)
    buffers = loader_buffers(workers, s.prefetch, s.batch, s.decoded_sample_bytes)
    # a RAM cache gets what the buffers leave, up to what it may hold
    cache_bytes = st.cache_bytes if st.cache is not None else 0.0
    if st.cache_in_ram and s.memory_cache_bytes is None:
        cache_bytes = max(0.0, min(cache_bytes, s.ram_bytes - buffers))
    hit = hit_ratio(cache_bytes, s.dataset_bytes, st.cache_policy, s.access, epoch=1) if st.cache else 0.0
    f = _fetch(s, replace(st, cache_bytes=cache_bytes), hit, inputs)
    fetch = f.steady / s.sample_bytes
    p = predict({"prep": prep, "fetch": fetch}, req.samples_per_s)
    first = predict({"prep": prep, "fetch": f.first / s.sample_bytes}, req.samples_per_s)
    au_range = None
    if f.low != f.high and not f.conditional:
        lo, hi = (
            _au(predict({"prep": prep, "fetch": x / s.sample_bytes}, req.samples_per_s))
            for x in (f.low, f.high)
        )
        au_range = (lo, hi) if hi - lo >= 5e-3 else None
    needed, needed_range = _needed(s, st, hit, prep) if f.conditional else (None, None)
    plan = ram_plan(
        ram_bytes=s.ram_bytes,
        buffers_bytes=buffers,
        cache_bytes=cache_bytes if st.cache_in_ram else 0.0,
        accelerator_memory_bytes=s.accelerator_memory_bytes * s.node_accelerators
        if s.accelerator_memory_bytes
        else None,
    )
    short = _shortfalls(s, st, buffers)
    from_backend = 1.0 - (hit if f.delivered is None else 0.0)
    backend_read = from_backend * p.samples_per_s * s.sample_bytes
    return PlacementOption(
        name=st.name,
        setup=st.setup,
        decode=decode,
        feasible=not short,
        why_not="; ".join(short),
        cache_bytes=cache_bytes,
        hit_ratio=hit,
        fetch_bytes_per_s=math.nan if f.conditional else f.steady,  # nan: the backend's rate is not known
        first_epoch_fetch_bytes_per_s=f.first,
        prep_samples_per_s=prep,
        prediction=p,
        first_epoch_au=_au(first) if math.isfinite(f.first) else math.nan,  # nan: backend not known
        cores_needed=cores,
        max_accelerators=max_accelerators(min(prep, fetch), s.per_accelerator.value),
        ram=plan,
        inputs=inputs,
        conditional=f.conditional,
        backend_needed_bytes_per_s=needed,
        backend_needed_range=needed_range,
        # what the nodes read from a store they share (the sharded NVMe's peers are the nodes themselves)
        cluster_backend_bytes_per_s=s.nodes * backend_read if st.setup not in ("local", "sharded") else 0.0,
        cluster_first_epoch_backend_bytes_per_s=s.nodes * first.samples_per_s * s.sample_bytes
        if math.isfinite(f.first)
        else math.nan,
        delivered=f.delivered,
        node_accelerators=s.node_accelerators,
        shortfalls=tuple(short),
        au_range=au_range,
        rate_key=st.key,
        remote_bytes_per_s=st.remote_share * backend_read,
        staging=st.staging,
        node_cores=s.cores,
    )


def _au(p: Prediction) -> float:
    """A node's predicted AU: its demand, from required(), is above 0, so the prediction has one."""
    assert p.au is not None
    return p.au


def _prep(
    s: Scenario, decode: str, cal: Calibration | None, fetch_cpu: float, inputs: dict[str, Figure]
) -> tuple[float, float, int]:
    """What one node's CPU (or its GPUs, decoding with DALI) prepares (samples/s), the cores feeding
    the demand takes and the loader's workers; each figure used is added to ``inputs``."""
    req = s.requirement
    other = cal.other_ms(fetch_cpu) if cal is not None else None
    if other is not None:
        assert cal is not None and cal.collate_ms is not None
        other_fig = Figure(
            other, f"measured: {_cpu_parts(cal, cal.collate_ms, fetch_cpu)}", origin="measured"
        )
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


def _origin(rate: DecodeRate) -> Origin:
    """A decode rate's kind as a figure's origin."""
    origins: dict[str, Origin] = {"given": "given", "run": "measured", "calibration": "measured"}
    return origins.get(rate.kind, "reference")


def rank_key(o: PlacementOption) -> tuple:
    """Feasible first; then options whose every rate is known before conditional ones; then the
    higher predicted AU; at equal AU the one that keeps fewer cores busy, then the one with less
    hardware (the node alone; the nodes and their network; a storage system beside them), then the
    setup's order and reading only or CPU decode before DALI. AU is compared to 2 decimals and cores
    in whole cores: closer than that the model cannot tell them apart."""
    return (
        not o.feasible,
        bool(o.conditional),
        -round(o.prediction.au or 0.0, 2),
        math.ceil(o.cores_needed - 1e-9),
        HARDWARE[o.setup],
        SETUP_ORDER.index(o.setup),
        DECODE_ORDER.index(o.decode),
    )


def decodes(s: Scenario) -> tuple[str, ...]:
    """Reading only for a workload read without decoding; else CPU decode, and DALI on NVIDIA GPUs
    (DALI runs on CUDA only)."""
    if s.decoding == "none":
        return ("none",)
    return ("cpu", "dali") if s.vendor == "nvidia" else ("cpu",)


def options(s: Scenario, cal: Calibration | None) -> list[PlacementOption]:
    """Every option for ``s``, best first (:func:`rank_key`)."""
    found = [_option(s, st, d, cal) for st in storages(s, cal) for d in decodes(s)]
    return sorted(found, key=rank_key)


def evaluate(s: Scenario, setup: Setup, decode: str, cal: Calibration | None) -> PlacementOption | None:
    """The one option of ``setup`` and ``decode`` for ``s`` (None where ``s`` has no such setup)."""
    st = next((st for st in storages(s, cal) if st.setup == setup), None)
    return _option(s, st, decode, cal) if st is not None and decode in decodes(s) else None
