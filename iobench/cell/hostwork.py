"""The host work of an emulated trainer step: a fixed amount of CPU work, cut as the real step is.

A real step is a sequence of torch operators, each one parallel region over the intra-op threads.
Under contention the regions wait for their slowest thread, so the step stretches by more than its
fair share of the cores. The emulation keeps that shape: ``ops_per_step`` element-wise operators on
``threads`` threads, each sized so that together they use the calibrated CPU time per step on an
idle host. The work is fixed (elements), not the time: on a busy host it takes longer, as the real
step does.
"""

from __future__ import annotations

import time

import torch

from iobench.cell.hostcost import HostCost

# the elements of one operator are measured over this many repetitions, the fastest kept: the
# host may be busy while the cell starts, and the fastest run is the one closest to idle
PROBE_REPEATS = 7
PROBE_ELEMENTS = 1 << 18


def _cpu_s_per_element(threads: int) -> float:
    """CPU seconds one element of the operator costs on ``threads`` threads, idle host."""
    src = torch.rand(PROBE_ELEMENTS)
    out = torch.empty_like(src)
    best = float("inf")
    for _ in range(PROBE_REPEATS):
        c0 = time.process_time()
        for _ in range(8):
            torch.mul(src, 1.0001, out=out)
        best = min(best, (time.process_time() - c0) / (8 * PROBE_ELEMENTS))
    return best


class HostWork:
    """``run()`` does one step's host work of ``cost`` on this thread and its intra-op pool."""

    def __init__(self, cost: HostCost) -> None:
        self.cost = cost
        self.threads = max(1, cost.threads)
        torch.set_num_threads(self.threads)
        self.ops = max(1, cost.ops_per_step)
        per_element = _cpu_s_per_element(self.threads)
        elements = int(cost.cpu_s_per_step / self.ops / per_element) if per_element > 0 else 0
        self._src = torch.rand(max(1, elements))
        self._out = torch.empty_like(self._src)

    def run(self) -> float:
        """Seconds of host wall time the work took."""
        t0 = time.perf_counter()
        for _ in range(self.ops):
            torch.mul(self._src, 1.0001, out=self._out)
        return time.perf_counter() - t0
