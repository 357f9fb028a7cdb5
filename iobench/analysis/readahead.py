"""A batch whose reader read ahead of it, as the two times the scale model replays.

A reader of one object per sample keeps ``concurrency`` reads in flight: taking a sample's bytes
asks for the read ``concurrency`` samples on. So a batch's first reads are asked for while its
maker (a worker, or the training process without workers) finishes the batch before it, and they
run on while the maker waits to be asked for the batch. The maker then takes each sample once its
bytes are in and it is done with the one before, spending its own time on each (decode, augment,
collate), and the batch's later reads are asked for as its first samples are taken. All of that is
max and plus, so the batch is ready at

    ready = max(began + from_begun, previous + from_previous)

``began``: when its maker began it; ``previous``: when its maker's previous batch was ready;
``from_begun``: its making when every byte read ahead is in by the time it begins (a maker that
waited: its later reads are asked for only now); ``from_previous``: its making when the maker began
it at once, paced by the bytes read ahead as they came in after its previous batch. Both are
replayed from the batch's own stamps: each read's latency (in - asked), which reads were asked for
before the maker began the batch and when their bytes were in, and the maker's own time per sample
(the batch's making less its waits for bytes, in equal shares). A model that kept one of them
would take a maker that waits longer (a rank waiting for its peers) as fast, or as slow, as the
measured one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def two_ways(
    asked: Sequence[float], arrived: Sequence[float], began: float, previous: float, own: float
) -> tuple[float, float] | None:
    """``(from_begun, from_previous)`` of one batch: ``asked[i]``/``arrived[i]``, when its sample
    ``i``'s read was asked for and when its bytes were in; ``began``, when its maker began it;
    ``previous``, when its maker's previous batch was ready; ``own``, the maker's own time on the
    batch (its making less its waits for bytes). None: no read was asked for before it began."""
    ahead = sum(1 for a in asked if a < began)
    if ahead == 0:
        return None
    latency = [b - a for a, b in zip(asked, arrived, strict=True)]
    each = own / len(asked)

    def ready(start: float, ahead_in: Sequence[float]) -> float:
        taken: list[float] = []
        free = start
        for i in range(len(asked)):
            # a later read is asked for when the sample ``ahead`` places before it is taken
            bytes_in = ahead_in[i] if i < ahead else taken[i - ahead] + latency[i]
            taken.append(max(free, bytes_in))
            free = taken[-1] + each
        return free

    return ready(0.0, [-math.inf] * ahead), ready(-math.inf, [arrived[i] - previous for i in range(ahead)])
