"""The recommender's arithmetic: pure functions of numbers, no I/O, each checked by hand in
tests/test_recommend_model.py. docs/recommend.md states the model and where each rule comes from.

Rates are samples per second; times are seconds per sample; sizes are bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..analysis.differential import PARTS, capacity
from ..analysis.verdict import AU_TARGET

CACHE_POLICIES = ("lru", "static")
ACCESS_ORDERS = ("shuffled", "sequential")


@dataclass(frozen=True)
class Requirement:
    samples_per_s: float
    bytes_per_s: float


def required(accelerators: int, per_accelerator: float, sample_bytes: float) -> Requirement:
    """What ``accelerators`` consuming ``per_accelerator`` samples/s each need from the input pipeline."""
    if accelerators < 1 or per_accelerator <= 0 or sample_bytes <= 0:
        raise ValueError(
            f"required(): accelerators={accelerators}, per_accelerator={per_accelerator}, "
            f"sample_bytes={sample_bytes}: all must be above 0"
        )
    rate = accelerators * per_accelerator
    return Requirement(rate, rate * sample_bytes)


def hit_ratio(cache_bytes: float, dataset_bytes: float, policy: str, access: str, *, epoch: int) -> float:
    """Expected fraction of reads a shard cache serves in ``epoch`` (0 = the first) of full passes.

    The first epoch starts with an empty cache: 0. A cache that holds the dataset then serves
    everything. A smaller one depends on what it keeps:

    - ``static`` pins a fixed subset: ``cache / dataset`` whatever the order;
    - ``lru`` (what loaders/storage/shardcache.py does) with the same order every epoch (``sequential``) evicts
      each shard just before it is read again: 0;
    - ``lru`` with an independent shuffle per epoch (``shuffled``, the loaders' default): a shard
      read a fraction u into one epoch and v into the next is still cached when fewer than
      ``cache`` distinct other shards were read in between: those after it in the first epoch
      (a random share 1 - u) or before it in the second (share v). A shard escapes both with
      probability u (1 - v), so the two cover 1 - u (1 - v) of the dataset, and the read hits
      when u (1 - v) > 1 - r, r = cache / dataset. For independent uniform u and v that has
      probability ``r + (1 - r) ln(1 - r)``: about r**2 / 2 for a small cache, 0.15 at r = 0.5,
      0.67 at r = 0.9 (against 0.5 and 0.9 for a pinned subset).
    """
    if dataset_bytes <= 0 or cache_bytes < 0:
        raise ValueError(
            f"hit_ratio(): dataset {dataset_bytes} B and cache {cache_bytes} B must be > 0 and >= 0"
        )
    if policy not in CACHE_POLICIES:
        raise ValueError(f"cache policy {policy!r}: allowed values are {', '.join(CACHE_POLICIES)}")
    if access not in ACCESS_ORDERS:
        raise ValueError(f"access order {access!r}: allowed values are {', '.join(ACCESS_ORDERS)}")
    if epoch == 0 or cache_bytes == 0:
        return 0.0
    if cache_bytes >= dataset_bytes:
        return 1.0
    r = cache_bytes / dataset_bytes
    if policy == "static":
        return r
    return r + (1.0 - r) * math.log1p(-r) if access == "shuffled" else 0.0


def mixed_rate(hit: float, cache_rate: float, backend_rate: float) -> float:
    """Rate of a cache in front of a backend when their times add: a fraction ``hit`` of the
    samples costs 1/cache_rate, the rest 1/backend_rate, one after the other (the harmonic mean
    weighted by the hit ratio). What the lab measured (docs/recommend.md, *Cache and backend*)."""
    _check_hit(hit, "mixed_rate")
    seconds = 0.0
    if hit > 0:
        seconds += hit / cache_rate
    if hit < 1:
        seconds += (1.0 - hit) / backend_rate
    return 1.0 / seconds if seconds > 0 else math.inf


def concurrent_rate(hit: float, cache_rate: float, backend_rate: float) -> float:
    """Rate of a cache in front of a backend that serve at once (many readers, nothing shared
    between them): each delivers its share up to its own rate, so the first to fill binds,
    ``min(cache_rate / hit, backend_rate / (1 - hit))``. An upper bound on :func:`mixed_rate`."""
    _check_hit(hit, "concurrent_rate")
    by_cache = cache_rate / hit if hit > 0 else math.inf
    by_backend = backend_rate / (1.0 - hit) if hit < 1 else math.inf
    return min(by_cache, by_backend)


def _check_hit(hit: float, where: str) -> None:
    if not 0.0 <= hit <= 1.0:
        raise ValueError(f"{where}(): hit ratio {hit} is outside [0, 1]")


def backend_needed(
    target: float, hit: float, cache_rate: float | None, *, concurrent: bool = False
) -> float | None:
    """The backend rate at which a cache serving ``hit`` of the reads at ``cache_rate`` and the
    backend the rest deliver ``target`` (:func:`mixed_rate`, or :func:`concurrent_rate`, solved for
    the backend); None when the cache alone delivers it, or cannot whatever the backend."""
    if hit >= 1.0:
        return None
    if concurrent:
        if hit and cache_rate and cache_rate / hit < target:
            return None  # the cache's own share caps the rate below the target
        return (1.0 - hit) * target
    spare = 1.0 / target - (hit / cache_rate if hit and cache_rate else 0.0)
    return (1.0 - hit) / spare if spare > 0 else None


def cpu_capacity(cores: float, cpu_s_per_sample: float) -> float:
    """Samples/s that ``cores`` fully busy cores deliver at ``cpu_s_per_sample`` each."""
    return cores / cpu_s_per_sample


@dataclass(frozen=True)
class Prediction:
    samples_per_s: float
    au: float | None  # samples/s over demand; None without a demand
    binding: str  # accelerator | prep | fetch (the names of analysis.differential.PARTS)
    capacities: dict[str, float]  # samples/s of each part alone (math.inf: not limiting)


def predict(capacities: dict[str, float], demand: float | None) -> Prediction:
    """Parts that overlap (loader workers ahead of the consumer, reads ahead of decode) deliver
    the smallest of their rates; the part with it binds. AU = rate / demand, as the emulated
    accelerator computes for samples / demand seconds of the wall time."""
    unknown = set(capacities) - set(PARTS)
    if unknown:
        raise ValueError(f"predict(): unknown parts {sorted(unknown)}; allowed: {', '.join(PARTS)}")
    present = {k: v for k, v in capacities.items() if v is not None}
    if demand is not None:
        present["accelerator"] = demand
    if not present:
        raise ValueError("predict(): no capacity given")
    binding = min(present, key=present.__getitem__)
    rate = present[binding]
    return Prediction(rate, min(1.0, rate / demand) if demand else None, binding, present)


def loader_rate(
    *,
    workers: int,
    cores: int,
    cpu_s_per_sample: float,
    fetch_rate: float,
    demand: float | None,
    main_s_per_sample: float = 0.0,
) -> Prediction:
    """One host's loader feeding one consumer.

    With ``workers >= 1`` each worker is one process on one core at a time, spending
    ``cpu_s_per_sample`` per sample, and the training process spends ``main_s_per_sample`` per
    sample receiving batches: the workers deliver at most ``workers / cpu`` and the cores at most
    ``cores / (cpu + main)`` (the training process competes for the cores only when the workers
    fill them). The parts overlap (:func:`predict`). With ``workers = 0`` the training process
    loads each batch itself, then trains on it: per sample it spends the CPU time and then
    1/demand, one after the other. Fetch waits overlap decode in both cases (kernel read-ahead,
    parallel ranged reads, a token bucket that fills while the reader decodes), so fetch caps
    the rate.
    """
    if workers < 0 or cores < 1 or cpu_s_per_sample <= 0 or main_s_per_sample < 0:
        raise ValueError(
            f"loader_rate(): workers={workers} (>= 0), cores={cores} (>= 1), "
            f"cpu_s_per_sample={cpu_s_per_sample} (> 0), main_s_per_sample={main_s_per_sample} (>= 0)"
        )
    if workers >= 1:
        prep = min(
            cpu_capacity(workers, cpu_s_per_sample), cpu_capacity(cores, cpu_s_per_sample + main_s_per_sample)
        )
        return predict({"prep": prep, "fetch": fetch_rate}, demand)
    compute_s = 1.0 / demand if demand else 0.0
    serial = 1.0 / (cpu_s_per_sample + compute_s)
    slower = "prep" if cpu_s_per_sample >= compute_s else "accelerator"
    binding = "fetch" if fetch_rate < serial else slower
    rate = min(serial, fetch_rate)
    capacities = {"prep": 1.0 / cpu_s_per_sample, "fetch": fetch_rate}
    if demand:
        capacities["accelerator"] = demand
    return Prediction(rate, min(1.0, rate / demand) if demand else None, binding, capacities)


def max_accelerators(input_rate: float, per_accelerator: float, target: float = AU_TARGET) -> int:
    """How many accelerators an input pipeline of ``input_rate`` keeps at >= ``target`` AU."""
    return capacity(input_rate, per_accelerator, target=target).max_accelerators


@dataclass(frozen=True)
class RamPlan:
    loader_buffers_bytes: float  # workers x (prefetch + 2) x batch x decoded sample
    cache_bytes: float  # dataset bytes kept in RAM (memory cache or page cache)
    needed_bytes: float
    available_bytes: float
    fits: bool
    rule_of_thumb_bytes: float | None  # 4 x total accelerator memory (a published hypothesis)
    meets_rule_of_thumb: bool | None


def loader_buffers(workers: int, prefetch: int, batch: int, decoded_sample_bytes: float) -> float:
    """Decoded samples the loader holds: per worker, ``prefetch`` batches in flight, the one it is
    writing and the one the training loop (or the pin-memory copy) holds: the batch-buffer slots the
    torch backend keeps per worker (loaders/pipeline/shmring.py)."""
    return max(1, workers) * (prefetch + 2) * batch * decoded_sample_bytes


def ram_plan(
    *,
    ram_bytes: float,
    buffers_bytes: float,
    cache_bytes: float,
    accelerator_memory_bytes: float | None,
    rule_factor: float = 4.0,
) -> RamPlan:
    """What the host's RAM must hold for an option, beside the published "RAM >= 4 x GPU memory"."""
    needed = buffers_bytes + cache_bytes
    rule = rule_factor * accelerator_memory_bytes if accelerator_memory_bytes else None
    return RamPlan(
        loader_buffers_bytes=buffers_bytes,
        cache_bytes=cache_bytes,
        needed_bytes=needed,
        available_bytes=ram_bytes,
        fits=needed <= ram_bytes,
        rule_of_thumb_bytes=rule,
        meets_rule_of_thumb=ram_bytes >= rule if rule is not None else None,
    )
