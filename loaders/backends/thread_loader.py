"""The thread backend ("threads"): the torch DataLoader backend's readers as threads of the
training process instead of worker processes.

    reader thread r (of ``workers``): its share of the plan -> read, shuffle, decode + augment
      straight into its batch's slots, collate -> a queue of ``prefetch`` finished batches
    main thread: takes one batch from each reader in turn (DataLoader's in-order round robin)

simplejpeg and OpenCV release the GIL while they decode and resize (92 % of a worker's CPU here),
so the readers run in parallel; what holds the GIL per sample (tar headers, bookkeeping, the
member's copy: ~8 %) bounds how many threads still scale. What threads save: no worker processes
to start (an epoch starts without a fork, imports or new storage clients per worker) and no
shared-memory hand-over of a batch (it is made where it is consumed). What they cost: the readers
share the training process's GIL with the training loop, so Python-heavy augmentations, or a
training step holding the GIL, slow them; docs/loaders.md says when each wins.

Every reader reads exactly the stream of the DataLoader backend's worker of the same number (the
same plan, shuffle and crops), so with the same settings both backends deliver the same batches,
each reader's in the same order (across readers, the DataLoader's order in an epoch its workers
started early differs). Ranks, ``len()``, resume and stats are the skeleton's
(:class:`loaders.backends.BaseLoader`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import torch

from loaders.backends.skeleton import BaseLoader, share_batches
from loaders.pipeline.assemble import Batch
from loaders.pipeline.handoff import END, in_turn, put
from loaders.plan import EpochPlan
from loaders.storage.sources import ShardSource


class ThreadLoader(BaseLoader):
    """Batches from ``config.workers`` reader threads (``workers=0``: one); see the module docstring.
    The "threads" backend of :func:`loaders.make_loader`."""

    backend = "threads"

    def _readers(self) -> int:
        return max(1, self.config.workers)

    def _epoch(self, epoch: int, skip: list[int], done: list[int]) -> Iterator[Batch]:
        # the readers are the parallelism: torch's intra-op pool only slows the small tensor ops
        torch.set_num_threads(1)
        plan = self.plan(epoch)
        stop = threading.Event()
        queues = [queue.Queue(maxsize=max(1, self.config.prefetch)) for _ in plan.readers]
        threads = [
            threading.Thread(
                target=self._read,
                args=(plan, reader, skip[reader], done[reader], queues[reader], stop),
                name=f"loaders-reader-{reader}",
                daemon=True,
            )
            for reader in range(len(plan.readers))
        ]
        for thread in threads:
            thread.start()
        try:
            yield from in_turn(queues)
        finally:
            stop.set()  # a consumer that stopped early: each reader stops at its next sample
            for thread in threads:
                thread.join()

    def _read(
        self, plan: EpochPlan, reader: int, skip: int, done: int, out: queue.Queue, stop: threading.Event
    ) -> None:
        """Reader ``reader``'s share of ``plan`` into ``out``, then END (or the error that ended it)."""

        source = ShardSource(self.config.source)  # one per reader: clients are not shared between threads
        try:
            for batch in share_batches(
                self.config, plan, reader, source, skip=skip, done=done, alive=lambda: not stop.is_set()
            ):
                if not put(out, batch, stop):
                    return
            put(out, END, stop)
        except BaseException as exc:  # handed to the consumer, who raises it
            put(out, exc, stop)
        finally:
            source.close()
