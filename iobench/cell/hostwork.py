"""The host work of an emulated trainer step: a fixed amount of CPU work, cut as the real step is.

A real step is a sequence of torch operators, each one parallel region over the intra-op threads.
Under contention a region waits for its slowest thread, so the step stretches by more than its
fair share of the cores. The emulation keeps that shape: ``ops_per_step`` operators on ``threads``
threads, each sized so that together they take the host's wall time of the step alone
(``HostCost.host_wall_s``). ``iobench calibrate`` sizes them beside the real step, so that both saw
the same load; a documented default is sized where it runs, on the fastest of its probes. The work
is fixed (elements), not the time: on a busy host it takes longer, as the real step does.

The operator is an element-wise sine: compute-bound, so its cost grows with the elements alone and
not with where they sit in the caches, and torch runs it in parallel over the intra-op threads.
Sizes are found with the wall clock: the kernel's CPU clock of some virtual machines ticks in
milliseconds, coarser than one operator.
"""

from __future__ import annotations

import time

import torch

from iobench.cell.hostcost import HostCost

# the operator is timed this many times at each probe size, and the fastest time per element
# kept: the host may be busy while the cell starts, and the fastest run is the one closest to idle
PROBE_REPEATS = 15
PROBE_ELEMENTS = (1 << 17, 1 << 18)  # large enough that the call's fixed cost is negligible


def seconds_per_element() -> float:
    """The operator's wall time per element on this host's intra-op threads, idle."""
    best = float("inf")
    for elements in PROBE_ELEMENTS:
        src = torch.rand(elements)
        out = torch.empty_like(src)
        for _ in range(PROBE_REPEATS):
            t0 = time.perf_counter()
            torch.sin(src, out=out)
            best = min(best, (time.perf_counter() - t0) / elements)
    return best


def sized(target_s: float) -> torch.Tensor:
    """A tensor whose operator takes ``target_s`` of wall time on an idle host."""
    return torch.rand(max(1, int(target_s / seconds_per_element())))


class HostWork:
    """``run()`` does one step's host work of ``cost`` on this thread and its intra-op pool."""

    def __init__(self, cost: HostCost) -> None:
        self.cost = cost
        self.threads = max(1, cost.threads)
        torch.set_num_threads(self.threads)
        self.ops = max(1, cost.ops_per_step)
        self._src = (
            torch.rand(cost.elements_per_op) if cost.elements_per_op else sized(cost.host_wall_s / self.ops)
        )
        self._out = torch.empty_like(self._src)

    def run(self) -> float:
        """Seconds of host wall time the work took."""
        t0 = time.perf_counter()
        for _ in range(self.ops):
            torch.sin(self._src, out=self._out)
        return time.perf_counter() - t0
