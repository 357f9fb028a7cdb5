"""The host work of an emulated trainer step: a fixed amount of CPU work, cut as the real step is.

A real step is a sequence of torch operators, each one parallel region over the intra-op threads.
Under contention a region waits for its slowest thread, so the step stretches by more than its
fair share of the cores, and by more the more regions it has. The emulation keeps that shape:
``ops_per_step`` operators on ``threads`` threads, together taking the host's wall time of the
step alone (``HostCost.host_wall_s``). The work is fixed (elements), not the time: on a busy host
it takes longer, as the real step does.

The operator is an element-wise modified Bessel function (``torch.special.i0``), which torch runs
on the intra-op threads: 11.7 ns per element on the 2-core development VM, compute-bound, so its
cost per element does not depend on where the tensor sits in the caches (a sine, at 0.5 ns, became
memory-bound above 512 Ki elements and 1-8x dearer), and a region as long as a real operator's
stays within ``MAX_ELEMENTS``. Under contention a step stretches with its number of regions (each
may wait a scheduler's time slice for a preempted thread: 195 regions of 0.27 ms stretched 10-15x
where the real step's 67 stretched 3x, issue 31), so the work has exactly ``ops_per_step`` of them
unless it needs more than ``MAX_ELEMENTS`` each. Their size is found on whole steps of the work, the
fastest of several, so that it holds at the load they ran under: ``iobench calibrate`` does this
right after timing the real step, so that both saw the same spell of load; a documented default is
sized where it runs. Times are wall times: the CPU clock of some virtual machines ticks in
milliseconds.
"""

from __future__ import annotations

import math
import time

import torch

from iobench.cell.hostcost import HostCost

MAX_ELEMENTS = 1 << 22
PROBE_ELEMENTS = 1 << 16  # the first guess's probe: 0.8 ms of work
PROBE_BLOCKS = 5  # whole steps of work timed where no calibration sized it


def work_seconds(elements: int, calls: int) -> float:
    """Wall seconds of ``calls`` operators over ``elements``."""
    src = torch.rand(elements)
    out = torch.empty_like(src)
    torch.special.i0(src, out=out)  # first touch of the output's pages
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.special.i0(src, out=out)
    return time.perf_counter() - t0


def size(host_wall_s: float, ops: int, blocks: int) -> tuple[int, int]:
    """(elements per operator, operators per step) so that a step of the work takes ``host_wall_s``:
    at least ``ops`` operators of at most ``MAX_ELEMENTS``, rescaled from the fastest of ``blocks``
    timed steps of it (the cost is linear in the elements)."""
    ops, blocks = max(1, ops), max(1, blocks)
    per_element = min(work_seconds(PROBE_ELEMENTS, 4) for _ in range(blocks)) / (4 * PROBE_ELEMENTS)
    elements = max(1, min(MAX_ELEMENTS, int(host_wall_s / ops / per_element)))
    calls = max(ops, round(host_wall_s / (elements * per_element)))
    fastest = min(work_seconds(elements, calls) for _ in range(blocks))
    # the elements a step of work needs, in ``ops`` operators unless that needs more than
    # MAX_ELEMENTS each
    total = elements * calls * host_wall_s / fastest
    elements = max(1, min(MAX_ELEMENTS, int(total / ops)))
    return elements, max(1, round(total / elements))


class HostWork:
    """``run()`` does one step's host work of ``cost`` on this thread and its intra-op pool."""

    def __init__(self, cost: HostCost) -> None:
        self.cost = cost
        self.threads = max(1, cost.threads)
        torch.set_num_threads(self.threads)
        if cost.elements_per_op and cost.ops_per_run:
            elements, self.ops = cost.elements_per_op, cost.ops_per_run
            if elements > MAX_ELEMENTS:  # scaled to a larger batch: more operators of at most MAX_ELEMENTS
                self.ops = math.ceil(self.ops * elements / MAX_ELEMENTS)
                elements = round(cost.elements_per_op * cost.ops_per_run / self.ops)
        else:
            elements, self.ops = size(cost.host_wall_s, cost.ops_per_step, PROBE_BLOCKS)
        self._src = torch.rand(elements)
        self._out = torch.empty_like(self._src)

    def run(self) -> float:
        """Seconds of host wall time the work took."""
        t0 = time.perf_counter()
        for _ in range(self.ops):
            torch.special.i0(self._src, out=self._out)
        return time.perf_counter() - t0
