"""every_known: a figure over parts is known only when every part's is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iobench.results.known import every_known


@given(st.lists(st.one_of(st.none(), st.integers())))
def test_the_values_come_back_whole_or_not_at_all(values):
    known = every_known(iter(values))
    if None in values:
        assert known is None
    else:
        assert known == values
