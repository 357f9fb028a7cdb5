"""The skeleton of the built-in backends: what every one of them does the same way (ranks, the
plan, ``len()``, resume, stats), so that a backend writes its epoch and little else.

Modelled on torchdata.nodes' ``BaseNode``, whose subclasses write only next/reset/state.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from functools import cached_property
from typing import Any, TypeVar

from loaders import registry
from loaders.config import LoaderConfig, plan_for
from loaders.contract import EpochCursor, deliver, fingerprint
from loaders.epochtally import EpochTally, expected_samples
from loaders.observe.counters import LoaderCounters
from loaders.observe.stages import StageStats
from loaders.pipeline.batch import Batch
from loaders.plan import EpochPlan, batches_of

_Loader = TypeVar("_Loader", bound="BaseLoader")


class BaseLoader:
    """The skeleton of every built-in backend (after torchdata.nodes' BaseNode: a subclass writes
    its epoch, the base does the rest). Its one constructor takes a :class:`LoaderConfig` and owns:

    - the config, its options checked once against the backend's declared ones, ranks resolved;
    - the plan: this rank's share of each epoch over ``readers`` readers (:func:`plan_for`), epoch 0
      planned at once, so data that cannot give every rank a batch is refused here, not in a worker;
    - ``len()``: the batches of the current (or next) epoch, one rank's shards counted when first asked;
    - resume: the epoch cursor (``set_epoch``, ``state_dict``, ``load_state_dict``), which keeps
      each reader's pipeline state from every batch the backend hands on before the consumer gets it;
    - ``stats``: every batch's counters, merged;
    - the count of each epoch (``tallies``): the samples its plan delivers against those delivered,
      and the loss budget (``max_lost_fraction``): an epoch that loses more fails with a
      :class:`~loaders.epochtally.SamplesLostError` naming the shards.

    A backend names itself (``backend``, its registry name) and writes ``_epoch``; where it needs to,
    ``_readers`` (default one reader), ``_build`` (its machinery, once the plan is known),
    ``_deliver`` (default :func:`deliver`), ``merged`` and ``close``.
    """

    backend: str
    # the readers' samples merge into one stream before they are batched (DALI's feed): the cursor
    # keeps that one stream's state, and len() batches the rank's samples as one
    merged: bool = False

    def __init__(self, config: LoaderConfig) -> None:
        config = registry.backend(self.backend).checked(config).with_ranks()
        self.config = config
        self.items = config.items()
        self.spec = config.pipeline
        self.stats = StageStats()
        self.tallies: list[EpochTally] = []  # each epoch read to its end: expected, delivered, lost
        self._plan: EpochPlan | None = None
        self._fingerprint: dict | None = None
        self.readers: int | None = None  # DALI's _readers plans with one reader to count its share
        self.readers = self._readers()
        if self.readers is not None:
            self.plan(0)
        self._cursor = EpochCursor(1 if self.merged or self.readers is None else self.readers)
        self._build()

    # -- what a backend writes --------------------------------------------------------------------

    def _readers(self) -> int | None:
        """How many readers share this rank's epoch (the plan's); None where the backend's own
        reader splits it (DALI's reader modes: no plan, and the backend writes ``__len__``)."""
        return 1

    def _build(self) -> None:
        """The backend's machinery (a DataLoader, a feed), made once the plan is known."""

    def _epoch(self, epoch: int, resumed: list[dict | None] | None) -> Generator[Batch, None, None]:
        """Every batch of ``epoch``, its bookkeeping naming its reader and that reader's pipeline state
        after it (``resume``); ``resumed``: where each reader goes on from (its state, or None for
        its start), None for a new epoch. Cleans up when closed early."""
        raise NotImplementedError

    def _deliver(self, batch: Batch) -> Any:
        """What the consumer receives for a counted batch."""
        return deliver(batch, self.config)

    def close(self) -> None:
        """Release what the backend holds now (workers, clients); by default nothing."""

    # -- what the skeleton does -------------------------------------------------------------------

    def __iter__(self) -> Iterator:
        epoch, resumed = self._cursor.begin()
        tally = EpochTally(epoch, None if resumed else self._expected(epoch))
        budget = self.spec.max_lost_fraction
        batches = self._epoch(epoch, resumed)
        stamp = tally.expected
        try:
            for batch in batches:
                if stamp is not None:  # the epoch's plan rides with its first batch: read per epoch
                    batch.stats.counters.merge(LoaderCounters(epoch_samples_expected=stamp))
                    stamp = None
                self.stats.merge(batch.stats)
                self._cursor.count(batch)  # before the yield: a state taken now includes this batch
                tally.add(batch.stats, len(batch) if batch.delivers else 0)
                if budget is not None and tally.over(budget):
                    raise tally.error(budget)
                if batch.delivers:
                    yield self._deliver(batch)
        finally:
            batches.close()  # an epoch left half-read: the backend's clean-up runs now, not at gc
        self._cursor.end()
        self._ended(tally, budget)

    def _expected(self, epoch: int) -> int | None:
        """The samples this rank's ``epoch`` delivers by its plan; None where the shards' counts are
        not known (remote shards without ``shard_samples``, a local shard that cannot be counted)."""
        if self.readers is None:
            return None  # DALI's own reader modes split the epoch themselves
        if self.counts is None:
            try:
                self.counts = self.config.counts()
            except (OSError, ValueError):
                return None
            self._plan = None
        if self.counts is None:
            return None
        return expected_samples(self.plan(epoch), self.spec.batch_size, self.spec.drop_last)

    def _ended(self, tally: EpochTally, budget: float | None) -> None:
        """An epoch read to its end: what it lost counted (``lost_samples_epoch``: the samples it
        delivered short of its plan), and the budget checked against it."""
        tally.ended = True
        self.tallies.append(tally)
        if tally.expected is not None and tally.lost:
            self.stats.counters.epoch_samples_lost += tally.lost
        if budget is not None and tally.over(budget):
            raise tally.error(budget)

    @cached_property
    def counts(self) -> list[int] | None:
        """Samples per item as the split needs them now (``LoaderConfig.split_counts``)."""
        return self.config.split_counts(self.readers or 1)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs."""
        return self._cursor.next_epoch

    def plan(self, epoch: int | None = None, readers: int | None = None) -> EpochPlan:
        """Which samples each reader of this rank reads in ``epoch`` (default: the current or next
        one), over ``readers`` readers (default: the loader's); the last plan asked for is kept."""
        if epoch is None:
            epoch = self._cursor.active if self._cursor.active is not None else self._cursor.next_epoch
        readers = readers or self.readers or 1
        if self._plan is None or self._plan.epoch != epoch or len(self._plan.readers) != readers:
            self._plan = plan_for(self.config, self.items, self.counts, epoch, readers)
        return self._plan

    def __len__(self) -> int:
        """The batches this rank yields in the current (or next) epoch: the same on every rank."""
        if self.counts is None:  # one rank: its shards are counted when first asked
            try:
                self.counts = self.config.counts()
            except (OSError, ValueError) as exc:
                # list(loader) asks len() for a hint and goes on; reading a shard that cannot be
                # counted then fails under the loader's own error policy, in the reader that reads it
                raise TypeError(f"len() could not count the shards' samples: {exc}") from exc
            self._plan = None
        plan = self.plan().counted()
        assert plan.samples is not None and plan.batches is not None  # counted() raised otherwise
        if self.merged:
            return batches_of(plan.samples, self.spec.batch_size, self.spec.drop_last)
        return plan.batches

    def set_epoch(self, epoch: int) -> None:
        self._cursor.set_epoch(epoch)

    def state_dict(self) -> dict:
        return self._cursor.state(self._fp())

    def load_state_dict(self, state: dict) -> None:
        self._cursor.load(state, self._fp())

    def _fp(self) -> dict:
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self.config, self._cursor.readers, self.backend)
        return self._fingerprint

    def __enter__(self: _Loader) -> _Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
