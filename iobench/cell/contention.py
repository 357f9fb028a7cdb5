"""How an emulated trainer's host work is cut: into as many parallel regions as make it stretch, beside
processes that take the host's cores, as the real step does.

A step's parallel regions each end at a barrier of the intra-op threads; when another process holds
a core, a region waits for its preempted thread (and the threads that wait spin for a while, which
takes more of the cores from the loader). So two steps of the same time and CPU alone stretch
differently under contention, by their number of barriers: 67 equal regions, as many as the real
small_cnn step has top-level operators, stretched 2.9-6.2x beside 1-3 busy processes where the real
step stretched 1.4-2.3x, because most of the real step's operators are too small to run in
parallel (issue 31). The number of regions the profiler shows is not the number of barriers, so
``iobench calibrate`` measures it: the real step and the host work cut into 1, 2, 4, ... regions,
each alone and beside ``h`` busy single-threaded processes (a loader's decode workers, as far as
the scheduler can tell), and keeps the cut whose stretches match the real step's best (least
squares on their logarithms). Each figure is a median of steps, alternated so that all saw the same
spell of load.
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from iobench.cell.hostcost import HostCost
from iobench.cell.hostwork import HostWork, size

BUSY = "while True: pass"
SETTLE_S = 0.3  # a busy process's interpreter start, before the timing starts
MEASURE_S = 1.0  # each figure's time budget, at least MIN_STEPS steps
MIN_STEPS = 4


@contextmanager
def busy_processes(count: int) -> Iterator[list[subprocess.Popen]]:
    """``count`` single-threaded busy loops, stopped on exit."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(count)]
    try:
        time.sleep(SETTLE_S if procs else 0.0)
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def median_step(step: Callable[[], object]) -> float:
    """Median wall seconds of ``step`` over ``MEASURE_S`` (at least ``MIN_STEPS`` steps)."""
    step()  # the first after a change of load is not yet in its steady state
    walls: list[float] = []
    t0 = time.perf_counter()
    while len(walls) < MIN_STEPS or time.perf_counter() - t0 < MEASURE_S:
        t = time.perf_counter()
        step()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


@dataclass(frozen=True)
class CutMatch:
    """The regions chosen, and the evidence: each cut's stretch beside each count of busy processes."""

    regions: int
    busy: tuple[int, ...]  # busy processes at each level
    real: tuple[float, ...]  # the real step's stretch at each level
    cuts: dict[int, tuple[float, ...]]  # regions -> the host work's stretch at each level

    def as_dict(self) -> dict:
        return {
            "regions": self.regions,
            "busy_processes": list(self.busy),
            "real_stretch": [round(s, 3) for s in self.real],
            "cut_stretch": {str(r): [round(s, 3) for s in v] for r, v in self.cuts.items()},
        }


def candidate_regions(ops_per_step: int) -> list[int]:
    """1, 2, 4, ... up to the step's top-level operators, and that count itself."""
    powers = [2**i for i in range(int(math.log2(max(1, ops_per_step))) + 1)]
    return sorted({*powers, max(1, ops_per_step)})


def busy_levels(cores: int) -> list[int]:
    """Busy processes to measure beside: half the usable cores and all of them (a loader that
    takes some of the host, one that takes all of it)."""
    return sorted({max(1, cores // 2), max(1, cores)})


def match_cut(
    real_step: Callable[[], object], cost: HostCost, levels: Sequence[int]
) -> tuple[HostCost, CutMatch]:
    """``cost`` with its host work cut into the regions that stretch as ``real_step`` does beside
    ``levels`` busy processes (elements per region sized here, alone)."""
    cut = {regions: size(cost.host_wall_s, regions, 3) for regions in candidate_regions(cost.ops_per_step)}
    works = {
        regions: HostWork(replace(cost, elements_per_op=elements, ops_per_run=ops))
        for regions, (elements, ops) in cut.items()
    }
    device = cost.step_alone_s if cost.device == "cpu" else (cost.device_s or 0.0)

    def emulated(work: HostWork) -> Callable[[], None]:
        def step() -> (
            None
        ):  # as the emulated accelerator steps: the host work, then the rest of the device time
            left = device - work.run()
            if left > 0:
                time.sleep(left)

        return step

    steps = {"real": real_step, **{r: emulated(w) for r, w in works.items()}}
    alone = {name: median_step(step) for name, step in steps.items()}
    stretched: dict[object, list[float]] = {name: [] for name in steps}
    for count in levels:
        with busy_processes(count):
            for name, step in steps.items():
                stretched[name].append(median_step(step) / alone[name])
    real = stretched.pop("real")

    def misfit(regions: int) -> float:
        return sum(math.log(c / r) ** 2 for c, r in zip(stretched[regions], real, strict=True))

    best = min(works, key=misfit)
    match = CutMatch(best, tuple(levels), tuple(real), {r: tuple(v) for r, v in stretched.items()})  # type: ignore[misc]
    elements, ops = cut[best]
    return replace(
        cost, elements_per_op=elements, ops_per_run=ops, regions=best, contention=match.as_dict()
    ), match
