"""Shard URL lists: brace expansion, and the split of an epoch over ranks and loader workers.

The even split (:func:`plan_epoch`; ``loaders.config.plan_for`` takes its inputs from a
``LoaderConfig``, for every backend and for iobench's ceilings alike). Data-parallel training ends every step in an all-reduce,
so a rank that runs out of batches before the others leaves them waiting for ever. With more than
one rank, every rank therefore reads exactly the same number of samples per epoch, and so yields
exactly the same number of batches, whatever the shards' sizes and counts:

- the epoch's shard order (a permutation drawn from seed and epoch, the same on every rank) is
  read as one sequence of samples, using each shard's sample count (``shard_samples``, which
  iobench fills from the dataset manifest; local shards are counted from their tar headers);
- rank r reads positions ``[r * n, (r + 1) * n)`` of it, where n is the samples per rank;
  within the rank, batch k goes to reader (worker) ``k % readers``, and each reader reads a
  contiguous range, so a shard is cut between two readers only at a range's edge (the second
  reader reads the first part of that shard again without decoding it). A shard smaller than a
  reader's share, or fewer shards than readers, is no problem: the split is by sample;
- fewer shards than readers of all ranks (workers x ranks): most of every shard is some other
  reader's, so each :class:`Part` is ``ranged``: read by byte range (a tar's members from its
  index, a Parquet file's row groups) rather than from the shard's start;
- ``remainder="drop"`` (default): n = total // ranks, the last ``total % ranks`` samples of the
  epoch's order are read by no rank this epoch (a different few every epoch);
  ``remainder="pad"``: n = ceil(total / ranks), and the shortfall is filled by repeating samples
  from the start of the epoch's order, so every sample is read at least once (exactly once, but
  for the few repeats); with ``drop_last`` the padding fills the last batch too;
- ``drop_last=True`` rounds n down (drop) or up (pad) to whole batches, so no batch is partial;
  without it the rank's last batch may be partial (the same size on every rank);
- an epoch that cannot give every rank one batch is refused with the numbers.

One rank alone has nobody to wait for: with at least as many shards as readers it reads whole
shards in a stride over its readers, sequentially, as it always did (no shard is read twice), and
the number of batches per epoch follows from the shards each reader drew (known exactly when the
counts are, possibly differing by a few partial batches from one epoch to the next). With fewer
shards than readers it splits by sample as several ranks do (every sample read once, ranged parts).
"""

from __future__ import annotations

import bisect
import itertools
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loaders.formats.base import local_path

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


# -- even epochs across ranks ---------------------------------------------------------------------

REMAINDER_POLICIES = ("drop", "pad")


class EvenSplitError(ValueError):
    """The data cannot give every rank the same number of batches (at least one), or the split
    needs per-shard sample counts that are not known."""


@dataclass(frozen=True)
class Part:
    """Samples ``[start, stop)`` of one shard, in the shard's own order (a rank's or a worker's
    share of a shard that the split cut between readers). ``ranged``: the shards are fewer than
    the readers, so most of a shard is other readers'; the part is read by byte range (a tar's
    members from its index, a Parquet file's row groups), not from the shard's start."""

    url: str
    start: int
    stop: int
    ranged: bool = False


@dataclass(frozen=True)
class ReaderPlan:
    """What one reader (a DataLoader worker, the nodes graph, the DALI feed's fetcher) reads in one
    epoch: whole shard URLs, :class:`Part` s of shards, or (key, url, label) objects, in order."""

    items: tuple
    samples: int | None  # positions of the reader's stream (None: counts not known)
    batches: int | None  # batches it yields (None: counts not known)


@dataclass(frozen=True)
class EpochPlan:
    """One rank's share of one epoch, reader by reader.

    ``split`` is ``"shards"`` (one rank with a shard per reader: whole shards in a stride over the
    readers, as before; the count of batches follows from the shards each reader drew) or
    ``"samples"`` (several ranks, or fewer shards than readers: every rank reads exactly
    ``samples`` samples as contiguous ranges of the epoch's shard order, so every rank yields
    exactly ``batches`` batches). ``dropped`` samples of the dataset are read
    by no rank this epoch (remainder "drop"); ``padded`` are read twice (remainder "pad").
    """

    epoch: int
    rank: int
    world_size: int
    split: str
    readers: tuple[ReaderPlan, ...]
    samples: int | None
    batches: int | None
    total: int | None
    dropped: int = 0
    padded: int = 0

    def counted(self) -> EpochPlan:
        """This plan, where the shards' sample counts were known; else the TypeError ``len()``
        raises (the batch count of whole shards drawn without counts is not known in advance)."""
        if self.samples is None or self.batches is None:
            raise TypeError(
                "len() needs every shard's sample count: pass shard_samples={url: n} (a dataset "
                "manifest has them) or use local shards, which are counted from their tar headers"
            )
        return self


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def batches_of(samples: int, batch_size: int, drop_last: bool) -> int:
    return samples // batch_size if drop_last else _ceil_div(samples, batch_size)


def epoch_order(n: int, *, seed: int, epoch: int) -> list[int]:
    """The epoch's item order, the same on every rank: a permutation drawn from (seed, epoch)."""
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def plan_epoch(
    items: Sequence,
    counts: Sequence[int] | None,
    *,
    rank: int = 0,
    world_size: int = 1,
    num_workers: int = 1,
    batch_size: int = 1,
    drop_last: bool = False,
    remainder: str = "drop",
    seed: int = 0,
    epoch: int = 0,
    objects: bool = False,
) -> EpochPlan:
    """Which samples each reader of rank ``rank`` reads in ``epoch`` (module docstring: the policy).

    ``counts[i]`` is the number of samples of ``items[i]`` (1 for an object); ``None`` when not
    known, which only one rank can do without (whole shards, batch count unknown).
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world_size {world_size}")
    if remainder not in REMAINDER_POLICIES:
        raise ValueError(f"remainder={remainder!r}: allowed values are {', '.join(REMAINDER_POLICIES)}")
    readers = max(1, num_workers)
    if counts is not None and len(counts) != len(items):
        raise ValueError(f"{len(counts)} sample count(s) for {len(items)} item(s)")
    if world_size == 1 and len(items) >= readers:
        return _whole_shards(items, counts, readers, batch_size, drop_last, seed, epoch)
    # fewer shards than readers of all ranks: a part is most of some other reader's shard
    ranged = not objects and len(items) < readers * world_size
    if counts is None:
        why = (
            f"an even split over {world_size} ranks"
            if world_size > 1
            else (f"splitting {len(items)} shard(s) over {readers} readers")
        )
        raise EvenSplitError(
            f"{why} needs every shard's sample count: pass shard_samples={{url: n}} (iobench fills "
            "it from the dataset's manifest), or use local shards (counted from their headers)"
        )
    total = int(sum(counts))
    r, b = world_size, batch_size
    if remainder == "drop":
        per_rank = total // r
        batches = batches_of(per_rank, b, drop_last)
        used = batches * b if drop_last else per_rank
    else:  # pad: every sample at least once, the shortfall repeated from the epoch's start
        batches = _ceil_div(total, r * b) if drop_last else _ceil_div(_ceil_div(total, r), b)
        used = batches * b if drop_last else _ceil_div(total, r)
    if batches < 1:
        need = f"{r} x {b} = {r * b} (drop_last)" if drop_last else f"{r}"
        raise EvenSplitError(
            f"{total} sample(s) cannot give each of {r} ranks one batch: at least {need} are needed; "
            f"use a smaller batch_size, fewer ranks" + (", or remainder='pad'" if total else "")
        )
    sizes = [b] * (batches - 1) + [used - (batches - 1) * b]
    order = epoch_order(len(items), seed=seed, epoch=epoch)
    ordered_counts = [int(counts[i]) for i in order]
    starts = list(itertools.accumulate(ordered_counts, initial=0))
    plans = []
    at = rank * used
    for w in range(readers):
        mine = sizes[w::readers]  # the rank's batches go to its readers in turn
        quota = sum(mine)
        plans.append(
            ReaderPlan(tuple(_segments(items, order, starts, at, quota, objects, ranged)), quota, len(mine))
        )
        at += quota
    return EpochPlan(
        epoch=epoch,
        rank=rank,
        world_size=r,
        split="samples",
        readers=tuple(plans),
        samples=used,
        batches=batches,
        total=total,
        dropped=max(0, total - r * used),
        padded=max(0, r * used - total),
    )


def _segments(
    items: Sequence, order: list[int], starts: list[int], at: int, quota: int, objects: bool, ranged: bool
):
    """The items covering positions ``[at, at + quota)`` of the epoch's concatenated sample order,
    wrapping around to its start (padding)."""
    total = starts[-1]
    pos = at % total if total else 0
    while quota > 0:
        k = bisect.bisect_right(starts, pos) - 1  # the shard holding position ``pos``
        within = pos - starts[k]
        take = min(quota, starts[k + 1] - pos)
        item = items[order[k]]
        if objects:
            yield item
        else:
            yield Part(item, within, within + take, ranged)
        quota -= take
        pos = (pos + take) % total


def _whole_shards(
    items: Sequence,
    counts: Sequence[int] | None,
    readers: int,
    batch_size: int,
    drop_last: bool,
    seed: int,
    epoch: int,
) -> EpochPlan:
    order = epoch_order(len(items), seed=seed, epoch=epoch)
    plans = []
    for w in range(readers):
        mine = order[w::readers]
        samples = None if counts is None else int(sum(counts[i] for i in mine))
        batches = None if samples is None else batches_of(samples, batch_size, drop_last)
        plans.append(ReaderPlan(tuple(items[i] for i in mine), samples, batches))
    total = None if counts is None else int(sum(counts))
    # known counts give every reader its count of batches
    batches = None if counts is None else sum(p.batches for p in plans if p.batches is not None)
    return EpochPlan(
        epoch=epoch,
        rank=0,
        world_size=1,
        split="shards",
        readers=tuple(plans),
        samples=total,
        batches=batches,
        total=total,
    )


# -- counting samples without reading them ---------------------------------------------------------


def count_samples(url: str) -> int | None:
    """The number of samples in a local shard, as its format counts them cheaply (a tar's headers,
    seeking over the data; a Parquet footer); None for a shard that is not local (reading it whole
    to count is not cheap)."""
    path = local_path(url)
    if path is None:
        return None
    from loaders.formats.table import reader_for

    return reader_for(path).count(path)


def sample_counts(items: Sequence[str], known: Mapping[str, int] | None) -> list[int] | None:
    """Every shard's sample count: from ``known`` (a manifest), else counted for local shards;
    None as soon as one cannot be had cheaply."""
    known = known or {}
    out = []
    for url in items:
        n = known.get(url)
        if n is None:
            n = count_samples(url)
        if n is None:
            return None
        out.append(int(n))
    return out
