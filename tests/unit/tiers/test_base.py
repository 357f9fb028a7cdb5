"""The cache state every tier reports from what it found resident (iobench.tiers.base)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iobench.tiers.base import COLD_MAX_FRACTION, WARM_MIN_FRACTION, resident_state


@given(total=st.integers(0, 2**40), share=st.floats(0.0, 1.0))
def test_the_resident_fraction_and_what_it_amounts_to_come_from_the_bytes(total, share):
    resident = int(total * share)
    told: list[tuple[float, str]] = []
    state = resident_state("cold", "m", resident, total, lambda f, a: told.append((f, a)) or "said")
    assert (state.resident_bytes_before, state.total_bytes, state.note) == (resident, total, "said")
    assert told == [(state.resident_fraction_before, state.achieved)]
    if total == 0:  # an empty dataset: nothing to be cached or not
        assert (state.resident_fraction_before, state.achieved) == (0.0, "unknown")
        return
    fraction = state.resident_fraction_before
    assert fraction == resident / total and 0.0 <= fraction <= 1.0
    want = (
        "cold"
        if fraction <= COLD_MAX_FRACTION
        else "warm"
        if fraction >= WARM_MIN_FRACTION
        else "partly-cold"
    )
    assert state.achieved == want
