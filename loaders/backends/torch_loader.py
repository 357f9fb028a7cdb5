"""The PyTorch DataLoader path: drop-in for training code in three lines.

    from loaders import ShardLoader
    loader = ShardLoader("/data/train-{000000..000127}.tar", batch_size=256, workers=8)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader: ...

Workers decode and collate whole batches (DataLoader ``batch_size=None``) so that the collate
stage is measured where it runs and only finished uint8 batches cross the process boundary.

Under DDP (torchrun) the rank and world size come from ``torch.distributed`` or the environment,
every rank yields exactly ``len(loader)`` batches per epoch (loaders.plan: the even split), and
``set_epoch`` reorders the shards as a DistributedSampler's does.

Persistent workers (the default): the workers live across epochs, so an epoch boundary costs no
fork and no new storage client (each worker keeps its clients). A new epoch reaches them through
a small shared control block: the loader writes the epoch, then resets the workers through
DataLoader's own reset of persistent workers; a worker reads the block whenever a stream starts,
and stops decoding for a stream the block no longer names. A resumed epoch (each reader's pipeline
state) starts new workers, which take the states along.

The next epoch is started early (``prefetch_next_epoch``, on by default): each worker streams its
share of one epoch after another, telling the loader when its share of epoch e is done (an END
marker) and starting on e + 1 at once, so the next epoch's first batches are ready when the
training loop asks. The loader sorts what arrives by the epoch each batch is tagged with; when the
next epoch is not the one the workers guessed (a ``set_epoch`` that jumps, a ``load_state_dict``,
an epoch left half-read) it restarts their streams as above. What that costs: after the last
epoch the loop reads, the workers have read (and requested from the storage) a few batches that
nobody takes: what DataLoader had asked of them (``prefetch`` per worker) and what a worker that
finished its share first made while the others finished theirs; ``loader.stats`` counts a batch
only when its epoch is read. ``prefetch_next_epoch=False`` keeps every epoch's work to what
was asked for (the storage's request count then equals the loader's after every epoch);
``persistent_workers=False`` forks new workers for every epoch instead.
"""

from __future__ import annotations

import multiprocessing
import os
import weakref
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.random  # DataLoader seeds it in every worker: loaded once here, not in every fork
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from loaders.backends.skeleton import BaseLoader
from loaders.config import KEYWORDS, LoaderConfig, plan_for
from loaders.contract import deliver
from loaders.observe.stages import StageStats
from loaders.pipeline.batch import Batch
from loaders.pipeline.reader import reader_batches
from loaders.pipeline.shmring import SharedBuffers, ShmRing, release_slot, ring_by_id
from loaders.plan import EpochPlan
from loaders.registry import backend
from loaders.storage.sources import ShardSource

START_METHODS = ("fork", "forkserver", "spawn")
# DataLoader's names for settings LoaderConfig already has
ALIASES = {"num_workers": "workers", "prefetch_factor": "prefetch"}
# DataLoader keywords that cannot apply to a stream of shards, and what to do instead
REFUSED = {
    "dataset": "the dataset is the shards (urls) or the objects",
    "sampler": "the even split is the sampler: shards are divided over ranks and workers by "
    "loaders.plan (rank, world_size, remainder), reordered by set_epoch",
    "batch_sampler": "workers assemble whole batches in shared memory; set batch_size and drop_last",
    "shuffle": "shards are reordered every epoch (seed, set_epoch) and samples shuffled within a "
    "reader by shuffle_buffer (1 turns that off)",
    "collate_fn": "workers collate in place (each crop is written straight into its slot of the "
    "batch in shared memory); transform the batch after it arrives instead",
}


def _quiet_worker(_: int) -> None:
    # one intra-op thread per worker: the workers are the parallelism, and torch's default pool
    # makes small tensor ops 30x slower on a busy box
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")


class _WorkerInit:
    """One thread per worker, then the user's ``worker_init_fn`` (picklable when that is)."""

    def __init__(self, user: Callable[[int], None] | None, start_method: str) -> None:
        self.user, self.start_method = user, start_method

    def __call__(self, worker_id: int) -> None:
        _quiet_worker(worker_id)
        if self.start_method != "fork":
            # a spawned (or forkserver) worker ends like a forked one: os._exit once multiprocessing
            # has run its own exit work (its semaphores unlinked, queues closed), skipping the
            # interpreter's teardown, where a native static thread object aborted a worker now and
            # then ("terminate called without an active exception", no Python frame left: 2 of
            # ~50 test runs here)
            from multiprocessing import util

            util.Finalize(None, os._exit, args=(0,), exitpriority=-100)
        if self.user is not None:
            self.user(worker_id)


class _Control:
    """What the loader tells its persistent workers when a stream starts: ``[generation, epoch]``,
    in shared memory that a forked, forkserver or spawned worker reaches alike (a torch shared
    tensor pickles as a file descriptor). Workers read it when DataLoader resets them (after the
    loader wrote it), and check between samples that the generation is still theirs."""

    def __init__(self) -> None:
        self.tensor = torch.zeros(2, dtype=torch.int64).share_memory_()
        self._values: np.ndarray | None = None

    def __getstate__(self) -> dict:
        return {"tensor": self.tensor}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._values = None

    @property
    def values(self) -> np.ndarray:
        if self._values is None:
            self._values = self.tensor.numpy()
        return self._values

    def generation(self) -> int:
        return int(self.values[0])

    def write(self, generation: int, epoch: int) -> None:
        self.values[1] = epoch
        self.values[0] = generation  # last: a worker checking between samples sees the new stream whole

    def read(self) -> tuple[int, int]:
        return int(self.values[0]), int(self.values[1])


END, STALE = "end", "stale"


@dataclass
class _Sent:
    """What a DataLoader worker sends: a batch of its stream (``generation``), or a marker: END (its
    share of ``epoch`` is complete) or STALE (its stream was abandoned, the loader is starting
    another). A batch's images travel in slot ``in_ring[1]`` of ring ``in_ring[0]`` (shape
    ``in_ring[2]``, N x H x W x 3) and its labels as a list, so no tensor crosses the process
    boundary; until it is received here, this record holds the slot, so a batch dropped in transit
    (torch discards prefetched batches on a reset) frees it."""

    generation: int
    epoch: int
    reader: int
    batch: Batch | None = None
    marker: str | None = None
    in_ring: tuple[int, int, tuple[int, ...], list[int]] | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_guard", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.in_ring is not None:
            self.__dict__["_guard"] = weakref.finalize(self, release_slot, self.in_ring[0], self.in_ring[1])

    @classmethod
    def packed(cls, batch: Batch, generation: int, ring: ShmRing | None) -> _Sent:
        """In a worker: ``batch`` to send, its images left in their ring slot when they are in one."""
        sent = cls(generation, batch.bookkeeping.epoch, batch.bookkeeping.reader, batch)
        images = batch.images
        if ring is None or images is None:
            return sent
        slot = ring.slot_of(images)
        if slot is not None:
            assert batch.labels is not None  # a batch with images has their labels
            shape = tuple(images.permute(0, 2, 3, 1).shape)
            sent.in_ring = (ring.id, slot, shape, batch.labels.tolist())
            batch.images = batch.labels = None
        return sent

    def received(self) -> Batch:
        """In the main process: the batch with its images and labels as tensors again."""
        batch = self.batch
        assert batch is not None
        if self.in_ring is None:
            return batch
        guard = self.__dict__.pop("_guard", None)
        if guard is not None:
            guard.detach()  # the tensor's own finalizer frees the slot from here on
        ring_id, slot, shape, labels = self.in_ring
        self.in_ring = None
        batch.images = ring_by_id(ring_id).tensor(slot, shape).permute(0, 3, 1, 2)
        batch.labels = torch.tensor(labels, dtype=torch.int64)
        return batch

    def pin_memory(self) -> _Sent:
        """Called by DataLoader(pin_memory=True) in its pin-memory thread."""
        if self.batch is not None:
            self.batch = self.received().pin_memory()
        return self


class ShardStream(IterableDataset):
    """An IterableDataset of collated batches from WebDataset shards (or per-sample objects), each
    reader (worker) reading its share of the epoch's plan (loaders.config.plan_for, the same
    partition the loader plans with). Built from the loader's ``LoaderConfig``; ``counts``: the
    samples per item the split needs (``LoaderConfig.split_counts``).

    A reader resumed from its pipeline state (a batch's ``bookkeeping.resume``) goes on with the batch
    after it. A reader's stream depends only on (seed, epoch, rank, reader, the plan), never on
    timing, so it resumes exactly. ``framed`` (the loader's own stream): each batch goes in a frame
    naming its stream's generation (:class:`_Sent`), its images in a slot of the loader's ring;
    else (a stream in a DataLoader of one's own) the batches themselves. ``persistent``: the workers live across epochs and learn where a stream starts from the
    control block when DataLoader resets them; else each worker takes ``start`` along when it
    starts. ``continuous`` (persistent workers only): a reader goes on to the next epoch when its
    share of one is done; else its stream ends with the epoch. ``readers``: the DataLoader's
    workers (default: however many the DataLoader that iterates it has).
    """

    def __init__(
        self,
        config: LoaderConfig,
        *,
        counts: Sequence[int] | None = None,
        readers: int | None = None,
        framed: bool = False,
        persistent: bool = False,
        continuous: bool = False,
    ) -> None:
        super().__init__()
        self.config = config.with_ranks()
        self.spec, self.source = self.config.pipeline, self.config.source
        self.objects = self.config.layout == "objects"
        self.framed = framed
        self.persistent, self.continuous = persistent and framed, persistent and framed and continuous
        self.counts = None if counts is None else list(counts)
        self.readers = readers
        self.control = _Control()
        # where streams of one epoch start: (generation, epoch, each reader's state or None), taken
        # along by each worker as it starts (a later change reaches only later workers)
        self.start: tuple[int, int, list[dict | None] | None] = (0, 0, None)
        self.ring: ShmRing | None = None  # batch buffers shared with the workers
        self._items: list | None = None
        self._plan: EpochPlan | None = None
        self._source: ShardSource | None = None  # this process's: its clients serve every epoch

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_source"] = None  # network clients do not cross processes; each worker makes its own
        state["_items"] = None  # the config holds them: not pickled twice for a spawned worker
        return state

    def source_here(self) -> ShardSource:
        if self._source is None:
            self._source = ShardSource(self.source)
        return self._source

    def plan(self, epoch: int, readers: int | None = None) -> EpochPlan:
        """This rank's share of ``epoch``, reader by reader (the last one asked for is kept)."""
        readers = self.readers or readers or 1
        if self._plan is None or self._plan.epoch != epoch or len(self._plan.readers) != readers:
            if self._items is None:
                self._items = self.config.items()
            if self.counts is None:  # a stream in a DataLoader of its own may have fewer shards than workers
                self.counts = self.config.split_counts(readers)
            self._plan = plan_for(self.config, self._items, self.counts, epoch, readers)
        return self._plan

    def __iter__(self) -> Iterator[_Sent | Batch]:
        info = get_worker_info()
        worker, readers = (info.id, info.num_workers) if info else (0, 1)
        if info is None:
            torch.set_num_threads(1)
        generation, epoch, resumed = self.start
        if self.persistent:  # what the loader wrote before it reset the workers
            generation, epoch = self.control.read()
        # a resumed epoch starts new workers, which took its states along with ``start``
        state = (
            resumed[worker]
            if resumed is not None and self.start[0] == generation and worker < len(resumed)
            else None
        )
        return self._stream(worker, readers, generation, epoch, state, shared=info is not None)

    def _stream(
        self, worker: int, readers: int, generation: int, epoch: int, state: dict | None, shared: bool
    ) -> Iterator[_Sent | Batch]:
        source = self.source_here()
        control = self.control

        def alive() -> bool:
            return control.generation() == generation

        ring = self.ring if shared else None
        try:
            while True:
                plan = self.plan(epoch, readers)
                batches = reader_batches(
                    self.config,
                    plan,
                    worker,
                    source,
                    buffers=SharedBuffers(ring, worker) if shared else None,
                    alive=alive if self.persistent else None,
                )
                batches.reset(state)
                # the batcher makes a batch when DataLoader hands this worker its next request, so a
                # batch's stamps leave out its time idle in the queue
                try:
                    for batch in batches:
                        yield _Sent.packed(batch, generation, ring) if self.framed else batch
                finally:
                    batches.close()
                if self.persistent and not alive():
                    break
                if not self.continuous:
                    return  # the end of the stream ends the epoch
                yield _Sent(generation, epoch, worker, marker=END)
                epoch, state = epoch + 1, None
            while True:  # abandoned: answer what DataLoader still asks of this stream at once
                yield _Sent(generation, epoch, worker, marker=STALE)
        finally:
            source.drain_into(StageStats())  # counters of a stream left half-read are not the next one's


class _Feed:
    """The loader's side of its readers' streams: what arrives, sorted by the epoch it belongs to.
    Batches of a later epoch (a reader that finished its share early went on) wait in ``ahead``."""

    def __init__(self, batches: Iterator[_Sent], generation: int, readers: int, continuous: bool) -> None:
        self.batches, self.generation, self.readers = batches, generation, readers
        self.continuous = continuous
        self.ahead: deque[_Sent] = deque()
        self.ended: dict[int, set[int]] = {}
        self.complete: int | None = None  # the last epoch delivered whole: the next may go on
        self.owner: object | None = None  # the loader iteration reading from it now
        self.stopped = False  # the loader started other streams: this one's batches never come
        self.ring: ShmRing | None = None

    def epoch(self, epoch: int) -> Iterator[_Sent]:
        """Every batch of ``epoch`` (and leftovers of earlier ones: counters), until every reader
        has ended its share."""
        for old in [e for e in self.ended if e < epoch]:
            del self.ended[old]
        held, later = self.ahead, deque[_Sent]()
        self.ahead = later
        while len(self.ended.get(epoch, ())) < self.readers:
            if self.stopped:
                raise RuntimeError(
                    "another iteration of this loader started before this one ended: with "
                    "persistent workers a loader serves one iteration at a time (the workers' "
                    "streams now serve the newer one); use persistent_workers=False to interleave"
                )
            if held:
                sent = held.popleft()
            else:
                try:
                    sent = next(self.batches)
                except StopIteration:
                    if not self.continuous:
                        return  # streams of one epoch: their end is the epoch's
                    raise RuntimeError(
                        f"the loader's workers stopped before ending epoch {epoch} (a worker died?)"
                    ) from None
            if sent.generation != self.generation or sent.marker == STALE:
                continue  # a stream abandoned earlier; a ring slot it holds is freed with it
            if sent.epoch > epoch:
                later.append(sent)
            elif sent.marker == END:
                self.ended.setdefault(sent.epoch, set()).add(sent.reader)
            else:
                yield sent
        later.extend(held)


class ShardLoader(BaseLoader):
    """Batches of (uint8 images N x 3 x H x W, int64 labels) from shards, with per-stage stats.

    The "torch" backend of :func:`loaders.make_loader`. One constructor: ``ShardLoader(config)``
    with a :class:`loaders.LoaderConfig` (what make_loader calls; yields :class:`Batch` objects), or
    for training code ``ShardLoader(urls, **keywords)``, the keywords being ``LoaderConfig``'s
    fields and DataLoader's own (``persistent_workers`` (default True: see the module docstring),
    ``prefetch_next_epoch``, ``multiprocessing_context`` ("fork", "forkserver", "spawn" or a
    context; the batch-buffer ring works under each), ``timeout``, ``pin_memory``,
    ``pin_memory_device``, ``in_order``, and ``num_workers`` / ``prefetch_factor`` for ``workers`` /
    ``prefetch``), which make the config, and yielding ``(images, labels)`` pairs unless
    ``return_batches=True``. ``sampler``, ``batch_sampler``, ``shuffle`` and ``collate_fn`` are
    refused, each with the reason. Code rather than settings, and so taken beside a config too:
    ``worker_init_fn`` (runs in each worker after it is set to one intra-op thread), ``generator``
    and ``return_batches``.

    ``len(loader)`` is the number of batches this rank yields in the epoch the next (or current)
    iteration runs: the same on every rank (loaders.plan).

    ``objects=[(key, url, label), ...]`` reads one object per sample instead of shards, with
    ``concurrency`` reads in flight per reader.

    ``stats`` accumulates fetch/decode/augment/collate times, bytes read, errors, request and
    cache counters over everything delivered so far. s3:// shards stream with ``concurrency``
    ranged GETs of ``part_bytes`` in flight; with ``cache_dir`` they go through a bounded local
    shard cache (``cache_bytes``, default half the free space) shared by every process on the host.

    ``state_dict()`` after k batches, given to ``load_state_dict`` of a new loader with the same
    settings, continues the epoch: every worker resets its pipeline to its state after the last of
    its batches the consumer received (the shard cursor, the shuffle buffer, the batch fill) and
    goes on from there, reading nothing again that was delivered.
    """

    backend = "torch"

    def __init__(
        self,
        config: LoaderConfig | str | Sequence[str] | None = None,
        /,
        *,
        return_batches: bool | None = None,
        worker_init_fn: Callable[[int], None] | None = None,
        generator: torch.Generator | None = None,
        **keywords: Any,
    ) -> None:
        given = isinstance(config, LoaderConfig)
        self._context = None  # a multiprocessing context object: code, so not among the options
        if isinstance(config, LoaderConfig):
            if keywords:
                raise TypeError(
                    f"ShardLoader takes a LoaderConfig or its fields as keywords, not both ({', '.join(keywords)})"
                )
            settled = config
        else:
            settled, self._context = _keywords_config(config, keywords)
        self.return_batches = given if return_batches is None else return_batches
        self._worker_init_fn, self._generator = worker_init_fn, generator
        super().__init__(settled)

    def _readers(self) -> int:
        return max(1, self.config.workers)

    def _build(self) -> None:
        config, options = self.config, self.config.options
        workers = config.workers
        self.persistent = bool(options["persistent_workers"]) and workers > 0
        self.continuous = self.persistent and bool(options["prefetch_next_epoch"])
        self.dataset = ShardStream(
            config,
            framed=True,
            counts=self.counts,
            readers=self.readers,
            persistent=self.persistent,
            continuous=self.continuous,
        )
        context = self._context
        if context is None and options["multiprocessing_context"] is not None:
            context = multiprocessing.get_context(options["multiprocessing_context"])
        start_method = (context or multiprocessing).get_start_method()
        pin = options["pin_memory"]
        # in_order is DataLoader's from torch 2.6: passed only when asked for, so torch 2.4 works
        extra: dict[str, Any] = {} if options["in_order"] else {"in_order": False}
        self._loader = DataLoader(
            self.dataset,
            batch_size=None,
            num_workers=workers,
            prefetch_factor=config.prefetch if workers > 0 else None,
            pin_memory=torch.cuda.is_available() if pin is None else pin,
            pin_memory_device=options["pin_memory_device"],
            worker_init_fn=_WorkerInit(self._worker_init_fn, start_method) if workers > 0 else None,
            multiprocessing_context=context if workers > 0 else None,
            timeout=options["timeout"] if workers > 0 else 0,
            generator=self._generator,
            persistent_workers=self.persistent,
            **extra,
        )
        self._feed: _Feed | None = None
        self._generation = 0

    def _make_ring(self) -> ShmRing | None:
        if self.config.workers == 0 or not self.spec.decode:  # byte lengths travel as a small tensor
            return None
        size = self.spec.augment.size
        # per worker: the batches DataLoader keeps in flight, the one being written, the one the
        # consumer holds, one in the pin-memory thread and one waiting for the next epoch; a
        # worker finding none free falls back to torch's own shared memory
        return ShmRing(self.config.workers, self.config.prefetch + 4, self.spec.batch_size * size * size * 3)

    def _start(self, epoch: int, resumed: list[dict | None] | None) -> _Feed:
        """(Re)start the readers' streams at ``epoch``: through DataLoader's reset of persistent
        workers, or with new workers (and a ring of their own: two iterations of a loader without
        persistent workers may run side by side). A resumed epoch takes new workers: the states
        go along with them."""
        if self.persistent:
            self._stop()
            if resumed is not None and self._loader._iterator is not None:
                self._shutdown(self._loader._iterator)
                self._loader._iterator = None
                self.dataset.ring = None
        self._generation += 1
        self.dataset.control.write(self._generation, epoch)
        self.dataset.start = (self._generation, epoch, resumed)
        if self.dataset.ring is None or not self.persistent:
            self.dataset.ring = self._make_ring()  # before the workers start: they take it along
        assert self.readers is not None  # the torch backend plans over its workers (_readers)
        feed = _Feed(iter(self._loader), self._generation, self.readers, self.continuous)
        feed.ring = self.dataset.ring  # batches in transit find their ring by id while it lives
        if self.persistent:
            self._feed = feed
        return feed

    def _stop(self) -> None:
        """The persistent workers' current streams are abandoned: they stop decoding for them at
        the next sample, and the iteration reading them fails if it goes on."""
        if self._feed is not None:
            self._feed.stopped = True
            self._generation += 1
            self.dataset.control.values[0] = self._generation
            self._feed = None

    @staticmethod
    def _shutdown(batches: Iterator | None) -> None:
        shutdown = getattr(batches, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()

    def close(self) -> None:
        """Stop the persistent workers now (they also stop when the loader is garbage collected)."""
        self._stop()
        self._shutdown(self._loader._iterator)
        self._loader._iterator = None
        if self.dataset._source is not None:  # workers=0: the main process's own clients
            self.dataset._source.close()
            self.dataset._source = None

    def __del__(self) -> None:
        # before DataLoader's own shutdown joins the workers: a worker reading ahead into the next
        # epoch would otherwise finish the batch in hand first (~95 ms for 64 crops here); told
        # now, it stops at its next sample
        if getattr(self, "_feed", None) is not None:
            self._stop()

    def _epoch(self, epoch: int, resumed: list[dict | None] | None) -> Generator[Batch, None, None]:
        feed = self._feed
        if not (self.continuous and feed is not None and feed.complete == epoch - 1 and resumed is None):
            feed = self._start(epoch, resumed)
        planned = self.plan(epoch).batches
        token = object()
        feed.owner = token
        failed = False
        try:
            for sent in feed.epoch(epoch):
                if sent.epoch != epoch:  # what a reader sent after the last epoch's last batch
                    assert sent.batch is not None  # Feed.epoch yields batches, never markers
                    self.stats.merge(sent.batch.stats)
                    continue
                batch = sent.received()
                # the skeleton counts this batch as it hands it on, and a consumer may stop right
                # after the plan's last one (zip with range(len(loader)))
                if batch.delivers and planned is not None and self._cursor.delivered + 1 >= planned:
                    feed.complete = epoch
                yield batch
            feed.complete = epoch
        except GeneratorExit:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            if feed.owner is token:
                feed.owner = None
                if not self.persistent or failed:
                    # the workers stop now, not at the next garbage collection (torch's re-raise of
                    # a worker error leaves a reference cycle); after an error (a worker that died,
                    # a shard that failed) the next epoch starts new workers with a new ring
                    if self.persistent:
                        self._stop()
                        self._loader._iterator = None
                        self.dataset.ring = None
                    self._shutdown(feed.batches)
                elif feed.complete != epoch:
                    self._stop()  # a consumer that stopped early: the streams stop at the next sample

    def _deliver(self, batch: Batch) -> Batch | tuple:
        batch = deliver(batch, self.config)
        return batch if self.return_batches else (batch.data, batch.labels)


def _keywords_config(urls: str | Sequence[str] | None, keywords: dict[str, Any]) -> tuple[LoaderConfig, Any]:
    """ShardLoader's keyword form: the ``LoaderConfig`` its keywords make (DataLoader's keywords
    that the torch backend declares become its options), and a multiprocessing context object
    given as ``multiprocessing_context`` (code, not a setting: it rides beside the config)."""
    refused = sorted(set(keywords) & set(REFUSED))
    if refused:
        raise TypeError(
            "ShardLoader does not take " + "; ".join(f"{name} ({REFUSED[name]})" for name in refused)
        )
    for alias, name in ALIASES.items():
        if alias in keywords:
            if name in keywords:
                raise TypeError(f"ShardLoader got both {alias} and {name}: they are the same setting")
            keywords[name] = keywords.pop(alias)
    declared = backend(ShardLoader.backend).options
    options = {name: keywords.pop(name) for name in list(keywords) if name in declared}
    context = options.get("multiprocessing_context")
    if context is not None and not isinstance(context, str):
        del options["multiprocessing_context"]
    else:
        context = None
    unknown = sorted(set(keywords) - KEYWORDS)
    if unknown:
        raise TypeError(f"ShardLoader got unexpected keyword argument(s): {', '.join(unknown)}")
    options = {**keywords.pop("options", {}), **options}
    return LoaderConfig(urls=urls, options=options, **keywords), context
