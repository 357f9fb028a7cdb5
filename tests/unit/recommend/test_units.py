"""The answer's units: the user's system (decimal unless they wrote binary), three significant
digits, and never a small figure printed as zero in a large unit."""

from __future__ import annotations

import pytest

from iobench.recommend.units import Units, duration, units_of


@pytest.mark.parametrize(
    ("n", "decimal", "binary"),
    [
        (0, "0 B", "0 B"),
        (999, "999 B", "999 B"),
        (115_657, "116 KB", "113 KiB"),
        (1.2e12, "1.2 TB", "1.09 TiB"),
        (30.72e12, "30.7 TB", "27.9 TiB"),
        (1e15, "1 PB", "909 TiB"),
        (2e9, "2 GB", "1.86 GiB"),
    ],
)
def test_sizes_in_either_system(n, decimal, binary):
    assert Units().size(n) == decimal and Units(binary=True).size(n) == binary


def test_a_small_rate_is_never_zero_in_a_large_unit():
    assert Units().rate(4.2e6) == "4.2 MB/s" and Units().rate(850e6) == "850 MB/s"
    assert Units().rate(float("inf")) == "unlimited"


def test_the_users_units_are_the_ones_they_wrote():
    assert units_of(["50TB", None, "2TB"]) == Units(binary=False)
    assert units_of(["50TiB", "1TiB"]) == Units(binary=True)
    assert units_of(["50TiB", "2TB"]) == Units(binary=False)  # both: decimal, the default
    assert units_of([None, "8x3.84TB"]) == Units(binary=False)


def test_durations():
    assert [duration(x) for x in (30, 1800, 4000, 3 * 86400)] == ["30 s", "30 min", "1.1 h", "3.0 days"]
