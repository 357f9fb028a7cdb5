"""Sizes as people write them: a number and its unit; a number alone is refused with the number
shown with a unit, because `--nvme 2x3.84` read as bytes was 8 bytes of NVMe without a word."""

from __future__ import annotations

import pytest

from iobench.host.units import format_bytes, parse_bandwidth, parse_size


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("2GB", 2 * 10**9),
        ("2gb", 2 * 10**9),  # units in any case
        ("1kb", 1000),
        ("3TB", 3 * 10**12),
        ("3.84TB", 384 * 10**10),
        ("512MiB", 512 * 2**20),
        ("512 MiB", 512 * 2**20),
        ("1.5 KiB", 1536),
        ("7B", 7),
        ("0", 0),  # nothing in any unit
        ("0.0", 0),
        (4096, 4096),  # a program's byte count, as it holds it
    ],
)
def test_a_size_with_its_unit_is_read(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize(
    ("text", "example"),
    [
        ("3.84", "e.g. '3.84GB' or '3.84MiB'"),
        ("110", "e.g. '110GB' or '110MiB'"),
        ("2000000000", "e.g. '2000000000B' if it counts bytes"),
        (" 64 ", "e.g. '64GB' or '64MiB'"),
    ],
)
def test_a_number_without_a_unit_is_refused_with_an_example(text, example):
    with pytest.raises(ValueError) as err:
        parse_size(text)
    message = str(err.value)
    assert f"{text!r} has no unit: write it after the number, {example}" in message
    assert "(B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)" in message


@pytest.mark.parametrize("text", [True, -1, "-1GB", "2 G B", "GB", "2XB", "", "1.2.3MB"])
def test_what_is_no_size_is_refused(text):
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


def test_a_rate_needs_its_unit_too():
    assert parse_bandwidth("50MB/s") == 50e6
    assert parse_bandwidth(1000) == 1000.0  # a number of bytes/s from code
    with pytest.raises(ValueError, match="'50' has no unit"):
        parse_bandwidth("50/s")


def test_a_byte_count_is_shown_in_the_largest_binary_unit_it_fills():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(128 * 2**20) == "128 MiB"
