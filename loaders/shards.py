"""Shard URL lists: brace expansion and the split of shards over ranks and loader workers."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

_RANGE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_LIST = re.compile(r"\{([^{}]*,[^{}]*)\}")


def expand_urls(spec: str | Sequence[str]) -> list[str]:
    """Expand ``train-{000000..000127}.tar`` ranges and ``{a,b}`` lists.

    Zero padding follows the first bound, as in webdataset's braceexpand. A sequence is expanded
    element by element; ``::`` separates several patterns in one string.
    """
    if not isinstance(spec, str):
        return [u for item in spec for u in expand_urls(item)]
    if "::" in spec:
        return expand_urls(spec.split("::"))
    found = [m for m in (_RANGE.search(spec), _LIST.search(spec)) if m]
    if not found:
        return [spec]
    m = min(found, key=lambda match: match.start())  # leftmost first, as braceexpand does
    head, tail = spec[: m.start()], spec[m.end() :]
    if m.re is _LIST:
        return [u for alt in m.group(1).split(",") for u in expand_urls(head + alt + tail)]
    lo, hi = m.group(1), m.group(2)
    if int(hi) < int(lo):
        raise ValueError(f"shard range {m.group(0)!r} in {spec!r} runs backwards")
    width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
    return [u for i in range(int(lo), int(hi) + 1) for u in expand_urls(f"{head}{i:0{width}d}{tail}")]


def shards_for(
    urls: Sequence[str],
    *,
    rank: int = 0,
    world_size: int = 1,
    worker: int = 0,
    num_workers: int = 1,
    seed: int = 0,
    epoch: int = 0,
    shuffle: bool = True,
) -> list[str]:
    """The shards one (rank, worker) reads in one epoch.

    Every rank draws the same permutation (seed + epoch), then takes a disjoint stride of it, so the
    union over all ranks and workers is every shard exactly once.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    if not 0 <= worker < num_workers:
        raise ValueError(f"worker {worker} is outside num_workers {num_workers}")
    order = list(urls)
    if shuffle:
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
    readers = world_size * num_workers
    return order[rank * num_workers + worker :: readers]


def check_splittable(n_shards: int, world_size: int, num_workers: int) -> None:
    """Refuse a split that would leave readers idle: they would silently cap the throughput."""
    readers = world_size * max(1, num_workers)
    if n_shards < readers:
        raise ValueError(
            f"{n_shards} shard(s) cannot feed {readers} readers ({world_size} rank(s) x "
            f"{max(1, num_workers)} worker(s)); write smaller shards (iobench dataset synth "
            f"--shard-size) or use fewer workers"
        )
