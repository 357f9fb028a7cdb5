from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iobench.checkpoint.sizes import HOST_SHARE, MODELS, state_size


@given(
    model=st.sampled_from([None, *MODELS]),
    size=st.integers(1, 10**14),
    memory=st.integers(1 << 30, 1 << 42),
    copies=st.integers(1, 2),
)
def test_a_state_never_exceeds_its_share_of_the_host_and_says_when_scaled(model, size, memory, copies):
    s = state_size(model, None if model else size, memory, copies)
    full = MODELS[model].checkpoint_bytes if model else size
    assert s.full_bytes == full and s.bytes <= full
    assert s.bytes <= max(
        full if full <= memory * HOST_SHARE / copies else 0, int(memory * HOST_SHARE / copies)
    )
    assert ("scaled to" in s.said) == (s.bytes < full)
    if model:
        assert model in s.said and "MLPerf Storage" in s.said
