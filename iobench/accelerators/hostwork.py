"""The host work of an emulated trainer step: a fixed amount of CPU work, cut as the real step is.

A real step is a sequence of torch operators, each one parallel region over the intra-op threads
(or a serial one, when it is small). Under contention a region waits for its slowest thread, so the
step stretches by more than its fair share of the cores, and by how much depends on how the step's
time is cut into regions. The emulation keeps that cut: one operator per top-level operator of the
real step, each with its share of the step's operator time (``HostCost.op_shares``; the
calibration's profile; equal shares of ``ops_per_step`` where none was measured), on ``threads``
threads, together taking the host's wall time of the step alone (``HostCost.host_wall_s``). The
work is fixed (elements), not the time: on a busy host it takes longer, as the real step does.

The operator is an element-wise modified Bessel function (``torch.special.i0``), which torch runs
on the intra-op threads above its grain size (32 Ki elements) and on the calling thread below it,
as it runs the real step's small operators: 11.7 ns per element on the 2-core development VM,
compute-bound, so its cost per element does not depend on where the tensor sits in the caches (a
sine, at 0.5 ns, became memory-bound above 512 Ki elements and 1-8x dearer). An operator of more
than ``MAX_ELEMENTS`` is cut into several. Why the shares and not equal regions: beside
two decode processes on 2 cores the real small_cnn step took 132-157 ms, the work cut in its
profile's shares 127-171 ms, the same work in 67 equal regions 160-380 ms; the real step's time
sits in a dozen large operators, and the more of a step's time lies in regions a preempted thread
can hold up, the more it stretches. The size is found on whole steps of the work, the fastest of
those timed over at least half a second: a shorter spell of load cannot make the work look dear and
the emulated trainer light. ``iobench calibrate`` sizes it right after timing the real step, so that
both saw the same load; a documented default is sized where it runs. Times are wall times: the CPU
clock of some virtual machines ticks in milliseconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch

from iobench.accelerators.hostcost import HostCost

MAX_ELEMENTS = 1 << 22
PROBE_ELEMENTS = 1 << 16  # the first guess's probe: 0.8 ms of work
PROBE_BLOCKS = 5  # whole steps of work timed where no calibration sized it
# and at least this much of it: a spell of work the host's counters do not see (another guest on
# the same physical cores) lasts a good part of a second, and sized within one the work comes out
# light (0.68x its sized time once the spell was over, 2026-12-07, when 5 steps of 20 ms were timed)
SIZING_S = 0.5
MAX_SIZING_STEPS = 1000


def regions(elements: int, shares: Sequence[float]) -> list[int]:
    """The elements of each operator of a step of ``elements`` cut in ``shares``; an operator of
    more than ``MAX_ELEMENTS`` becomes as many operators of at most that as it needs."""
    sizes = []
    for share in shares:
        n = max(1, round(elements * share))
        pieces = math.ceil(n / MAX_ELEMENTS)
        sizes += [math.ceil(n / pieces)] * pieces
    return sizes


class _Operators:
    """One step's operators: ``torch.special.i0`` over views of one buffer, one per size."""

    def __init__(self, sizes: Sequence[int]) -> None:
        src = torch.rand(max(sizes))
        out = torch.empty_like(src)
        torch.special.i0(src, out=out)  # first touch of the output's pages
        self.views = [(src[:n], out[:n]) for n in sizes]

    def run(self) -> float:
        t0 = time.perf_counter()
        for src, out in self.views:
            torch.special.i0(src, out=out)
        return time.perf_counter() - t0


def work_seconds(sizes: Sequence[int]) -> float:
    """Wall seconds of one pass over operators of ``sizes`` elements."""
    return _Operators(sizes).run()


def elements_for(
    host_wall_s: float, shares: Sequence[float], blocks: int, at_least_s: float = SIZING_S
) -> int:
    """The elements a step of work cut in ``shares`` needs to take ``host_wall_s``: a first guess
    from a probe, rescaled by the fastest of the timed steps of it (the cost is linear in the
    elements): ``blocks`` steps, and more until they add up to ``at_least_s``."""
    blocks = max(1, blocks)
    per_element = min(work_seconds([PROBE_ELEMENTS] * 4) for _ in range(blocks)) / (4 * PROBE_ELEMENTS)
    guess = max(1, round(host_wall_s / per_element))
    step = _Operators(regions(guess, shares))
    walls = [step.run() for _ in range(blocks)]
    while sum(walls) < at_least_s and len(walls) < MAX_SIZING_STEPS:
        walls.append(step.run())
    return max(1, round(guess * host_wall_s / min(walls)))


class HostWork:
    """``run()`` does one step's host work of ``cost`` on this thread and its intra-op pool."""

    def __init__(self, cost: HostCost) -> None:
        self.cost = cost
        self.threads = max(1, cost.threads)
        torch.set_num_threads(self.threads)
        elements = cost.elements_per_step or elements_for(cost.host_wall_s, cost.shares, PROBE_BLOCKS)
        # what the work takes on this host, where it was sized here and now (not carried in)
        self.sized_s = None if cost.elements_per_step else cost.host_wall_s
        self.sizes = regions(elements, cost.shares)
        self._operators = _Operators(self.sizes)

    def run(self) -> float:
        """Seconds of host wall time the work took."""
        return self._operators.run()
