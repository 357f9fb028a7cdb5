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

import threading
from collections.abc import Generator

import torch

from loaders.backends.skeleton import BaseLoader
from loaders.pipeline.batch import Batch
from loaders.pipeline.in_turn import InTurn
from loaders.pipeline.reader import reader_batches
from loaders.storage.sources import ShardSource


class ThreadLoader(BaseLoader):
    """Batches from ``config.workers`` reader threads (``workers=0``: one); see the module docstring.
    The "threads" backend of :func:`loaders.make_loader`."""

    backend = "threads"

    def _readers(self) -> int:
        return max(1, self.config.workers)

    def _epoch(self, epoch: int, resumed: list[dict | None] | None) -> Generator[Batch, None, None]:
        # the readers are the parallelism: torch's intra-op pool only slows the small tensor ops
        torch.set_num_threads(1)
        plan = self.plan(epoch)
        # one storage source per reader: clients are not shared between threads
        sources = [ShardSource(self.config.source) for _ in plan.readers]
        stop = threading.Event()
        batchers = [
            reader_batches(self.config, plan, r, source, alive=lambda: not stop.is_set())
            for r, source in enumerate(sources)
        ]
        readers = InTurn(batchers, self.config.prefetch, stop, name="loaders-reader")
        # each reader resets to its state in its own thread, reading again there what the state holds
        everyone = list(range(len(batchers)))
        readers.reset(None if resumed is None else {"live": everyone, "turn": 0, "sources": resumed})
        try:
            yield from readers
        finally:
            readers.close()  # a consumer that stopped early: each reader stops at its next sample
            for source in sources:
                source.close()
