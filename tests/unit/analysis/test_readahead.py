"""A batch whose reader read ahead of it (analysis/readahead.py): its two times by hand, against a
sample-by-sample simulation for any moment its maker begins it, and as production() replays them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iobench.analysis.queue import LoaderQueue
from iobench.analysis.readahead import two_ways
from iobench.analysis.scale import production
from iobench.results.figures import StepRow

# four samples, milliseconds: reads of the first two asked for (99, 99.5) before the maker began
# (103), in at 105 and 108; each later read asked for when the sample two places before it is
# taken, 10 ms latency; 1 ms of the maker's own per sample; its previous batch ready at 100
ASKED, ARRIVED, BEGAN, PREVIOUS, OWN = (99, 99.5, 105, 108), (105, 108, 115, 118), 103, 100, 4


def test_the_two_times_by_hand():
    # with the bytes read ahead in when it begins: takes 0 and 1 at once (done at 1 and 2), asks
    # for 2 and 3 at 0 and 1, in at 10 and 11, done at 12; paced by them: takes 0 at 5, 1 at 8,
    # asks for 2 and 3 then, in at 15 and 18, done at 19 after its previous batch
    assert two_ways(ASKED, ARRIVED, BEGAN, PREVIOUS, OWN) == pytest.approx((12, 19))
    assert two_ways((104, 105), (110, 111), 103, 100, 2) is None  # nothing read ahead of it


def _sample_by_sample(began: float, ahead_in: list[float], latency: list[float], each: float) -> float:
    """The maker takes sample i once it is done with the one before and its bytes are in; taking
    sample i asks for the read of sample i + len(ahead_in)."""
    n, c = len(latency), len(ahead_in)
    arrived = list(ahead_in) + [math.inf] * (n - c)
    free = began
    for i in range(n):
        taken = max(free, arrived[i])
        if i + c < n:
            arrived[i + c] = taken + latency[i + c]
        free = taken + each
    return free


@pytest.mark.parametrize("seed", range(5))
def test_a_batch_is_ready_at_the_later_of_the_two_whenever_its_maker_begins(seed: int):
    rng = np.random.default_rng(seed)
    n, c, each, previous = 16, int(rng.integers(1, 8)), 0.001, 10.0
    latency = list(rng.lognormal(np.log(0.005), 1.0, n))
    ahead_in = sorted(previous + rng.lognormal(np.log(0.01), 1.0, c))
    asked = [previous - 0.001] * c  # asked for while the previous batch was finished
    began = previous + 0.002  # as measured: begun before the bytes read ahead were in
    arrived = list(ahead_in)
    free = began
    taken = []
    for i in range(n):  # the measured batch, to stamp its later reads
        if i >= c:
            asked.append(taken[i - c])
            arrived.append(taken[i - c] + latency[i])
        taken.append(max(free, arrived[i]))
        free = taken[-1] + each
    from_begun, from_previous = two_ways(asked, arrived, began, previous, each * n)
    for start in previous + np.array([0.0, 0.002, 0.01, 0.05, 0.5]):  # however long the maker waits
        expected = _sample_by_sample(float(start), ahead_in, latency, each)
        assert max(start + from_begun, previous + from_previous) == pytest.approx(expected, abs=1e-12)


def test_production_replays_the_two_times_of_each_stamped_batch():
    ms = 0.001
    first = StepRow(0, 0, False, 0.0, 0.1, 0.0, 0.05, 0.15, 4, 0, begun_s=0.0, ready_s=0.1)
    second = StepRow(
        1, 0, False, 0.15, 0.0, 0.0, 0.05, 0.2, 4, 0, begun_s=BEGAN * ms, ready_s=119 * ms,
        fetch_wait_s=12 * ms,  # its waits for bytes: 2 + 2 + 6 + 2 ms of its 16
        read_asked_s=[a * ms for a in ASKED], read_in_s=[b * ms for b in ARRIVED],
    )  # fmt: skip
    got = production([first, second], LoaderQueue(1, 2))
    assert got.made == pytest.approx([0.1, 12 * ms]) and got.ahead[1] == pytest.approx(19 * ms)
    assert np.isneginf(got.ahead[0])  # its maker's first batch: no previous one to pace it
    assert production([first], LoaderQueue(1, 2)).ahead is None  # nothing read ahead
