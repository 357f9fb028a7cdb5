"""The emulated host work's cut, matched to how a real step stretches beside busy processes
(cell/contention.py)."""

from __future__ import annotations

import time
from dataclasses import replace

import psutil
import pytest

from iobench.cell import contention
from iobench.cell.hostcost import HostCost
from iobench.cell.hostwork import HostWork, size


def test_the_candidate_cuts_run_from_one_region_to_every_operator():
    assert contention.candidate_regions(67) == [1, 2, 4, 8, 16, 32, 64, 67]
    assert contention.candidate_regions(1) == [1]
    assert contention.busy_levels(2) == [1, 2] and contention.busy_levels(16) == [8, 16]
    assert contention.busy_levels(1) == [1]


def test_busy_processes_spin_and_are_gone_after():
    with contention.busy_processes(2) as procs:
        watched = [psutil.Process(p.pid) for p in procs]
        before = [sum(w.cpu_times()[:2]) for w in watched]
        time.sleep(0.5)
        # each spins for whatever share of a core it gets (the host may be busy with other work too)
        assert all(sum(w.cpu_times()[:2]) - b > 0.05 for w, b in zip(watched, before, strict=True))
    assert all(p.poll() is not None for p in procs)


@pytest.mark.slow  # every cut of the work alone and beside busy processes: ~15 s on 2 cores
def test_a_step_cut_in_known_regions_is_matched_by_a_cut_that_stretches_as_it_does(monkeypatch):
    monkeypatch.setattr(contention, "MEASURE_S", 0.4)
    cost = HostCost("small_cnn", "cpu", 8, 0.030, 0.060, 2, 8, None, "test", "default")
    elements, ops = size(cost.host_wall_s, 8, 3)
    real = HostWork(replace(cost, elements_per_op=elements, ops_per_run=ops))
    chosen, match = contention.match_cut(real.run, cost, [1, 2])
    assert chosen.regions == match.regions and set(match.cuts) == {1, 2, 4, 8}
    assert chosen.elements_per_op and chosen.ops_per_run >= chosen.regions
    # the chosen cut stretches as the step does (the 8-region cut is the step itself: a perfect
    # match exists, so the best one is close), and a busy host stretches every step
    assert max(match.real) > 1.05
    for got, want in zip(match.cuts[match.regions], match.real, strict=True):
        assert got == pytest.approx(want, rel=0.25)
    assert chosen.contention["real_stretch"] == [round(s, 3) for s in match.real]
