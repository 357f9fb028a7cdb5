"""The host work of an emulated trainer step: a fixed amount of CPU work, cut as the real step is.

A real step is a sequence of torch operators, each one parallel region over the intra-op threads.
Under contention a region waits for its slowest thread, so the step stretches by more than its
fair share of the cores. The emulation keeps that shape: at least ``ops_per_step`` operators on
``threads`` threads, together taking the host's wall time of the step alone
(``HostCost.host_wall_s``). The work is fixed (elements), not the time: on a busy host it takes
longer, as the real step does.

The operator is an element-wise sine over at most ``MAX_ELEMENTS``: compute-bound and held in the
caches, so its cost is the same per element at any size up to that (0.51 ns per element from 32 Ki
to 512 Ki elements on the 2-core development VM, 1-8x that and erratic above), and torch runs it on
the intra-op threads. Its speed is timed with the wall clock (the CPU clock of some virtual machines
ticks in milliseconds): by ``iobench calibrate`` beside the real step, in blocks as long as a step so
that both saw the same load, or, for a documented default, where it runs.
"""

from __future__ import annotations

import time

import torch

from iobench.cell.hostcost import HostCost

MAX_ELEMENTS = 1 << 19
PROBES = 15  # blocks timed where the host work is sized without a calibration; the fastest kept
PROBE_CALLS = 4


def seconds_per_element(calls: int = PROBE_CALLS) -> float:
    """One block of ``calls`` operators over ``MAX_ELEMENTS``: its wall time per element."""
    src = torch.rand(MAX_ELEMENTS)
    out = torch.empty_like(src)
    torch.sin(src, out=out)  # first touch of the output's pages
    t0 = time.perf_counter()
    for _ in range(calls):
        torch.sin(src, out=out)
    return (time.perf_counter() - t0) / (calls * MAX_ELEMENTS)


def plan(host_wall_s: float, ops: int, per_element_s: float) -> tuple[int, int]:
    """(elements per operator, operators per step) for ``host_wall_s`` of work cut into at least
    ``ops`` operators."""
    elements = max(1, min(MAX_ELEMENTS, int(host_wall_s / max(1, ops) / per_element_s)))
    return elements, max(1, round(host_wall_s / (elements * per_element_s)))


class HostWork:
    """``run()`` does one step's host work of ``cost`` on this thread and its intra-op pool."""

    def __init__(self, cost: HostCost) -> None:
        self.cost = cost
        self.threads = max(1, cost.threads)
        torch.set_num_threads(self.threads)
        per_element = cost.seconds_per_element or min(seconds_per_element() for _ in range(PROBES))
        elements, self.calls = plan(cost.host_wall_s, cost.ops_per_step, per_element)
        self._src = torch.rand(elements)
        self._out = torch.empty_like(self._src)

    def run(self) -> float:
        """Seconds of host wall time the work took."""
        t0 = time.perf_counter()
        for _ in range(self.calls):
            torch.sin(self._src, out=self._out)
        return time.perf_counter() - t0
