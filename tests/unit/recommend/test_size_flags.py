"""recommend's size flags: a number without its unit is refused naming the flag and the value, never
read as bytes (`--nvme 2x3.84` was 8 bytes of NVMe, `--ram 1024` a node of 0 GB)."""

from __future__ import annotations

import argparse

import pytest

from iobench.recommend.cli import add_recommend_arguments, scenario

GOOD = {
    "--dataset-size": "5TB",
    "--sample-size": "110KB",
    "--nvme": "2x3.84TB",
    "--ram": "1TB",
}


def _args(**flags: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_recommend_arguments(p)
    argv = ["--accelerators", "8xH100", "--cores", "96"]
    for flag, value in {**GOOD, **flags}.items():
        argv += [flag, value]
    return p.parse_args(argv)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--nvme", "2x3.84", "--nvme 2x3.84: '3.84' has no unit: write it after the number, e.g. '3.84GB'"),
        ("--ram", "1024", "--ram 1024: '1024' has no unit: write it after the number, e.g. '1024B' if it"),
        ("--dataset-size", "5000", "--dataset-size 5000: '5000' has no unit"),
        (
            "--sample-size",
            "110",
            "--sample-size 110: '110' has no unit: write it after the number, e.g. '110GB'",
        ),
        ("--memory-cache", "64", "--memory-cache 64: '64' has no unit"),
        ("--decoded-sample-size", "150000", "--decoded-sample-size 150000: '150000' has no unit"),
    ],
)
def test_a_size_flag_without_a_unit_is_refused(flag, value, message):
    with pytest.raises(ValueError) as err:
        scenario(_args(**{flag: value}))
    assert message in str(err.value)
    assert "(B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)" in str(err.value)


def test_sizes_with_their_units_are_read():
    s = scenario(_args(**{"--memory-cache": "0"}))  # no cache: 0 needs no unit
    assert s.dataset_bytes == 5e12 and s.sample_bytes == 110e3
    assert s.memory_cache_bytes == 0.0
    s = scenario(_args())
    assert s.nvme_bytes == 2 * 3.84e12 and s.ram_bytes == 1e12
