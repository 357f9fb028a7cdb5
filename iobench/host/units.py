"""Human-readable byte sizes: parse ``"2GB"`` / ``"512MiB"`` and print them back."""

from __future__ import annotations

import math
import re

_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
UNIT_NAMES = "B, KB, MB, GB, TB, KiB, MiB, GiB or TiB"
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """Bytes in a size as a person writes it: a number and its unit, decimal KB/MB/GB/TB, binary
    KiB/MiB/GiB/TiB or B, case-insensitive (``"2GB"``, ``"512 MiB"``, ``"7B"``).

    Text without a unit is refused, 0 alone excepted: ``"3.84"`` may mean bytes, GB or TB, and
    read as bytes it is off by a factor of a billion without a word. An int is a count of bytes a
    program already holds (a default, a computed limit) and is taken as it is; a file's reader
    that gets a bare number from its user hands it over as text (``str(value)``) to have it
    refused here. Raises ``ValueError`` naming the input and showing it with a unit."""
    if isinstance(text, bool):
        raise ValueError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size must not be negative: {text!r}")
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (expected a number and its unit, e.g. '2GB' or '512MiB')")
    number, unit = m.group(1), m.group(2).lower()
    if not unit:
        if float(number) == 0:
            return 0
        # a count in the thousands and up may well be bytes; a smaller number is a size in larger units
        example = (
            f"'{number}B' if it counts bytes" if float(number) >= 1000 else f"'{number}GB' or '{number}MiB'"
        )
        raise ValueError(f"{text!r} has no unit: write it after the number, e.g. {example} ({UNIT_NAMES})")
    if unit not in _UNITS:
        raise ValueError(f"unknown size unit {m.group(2)!r} in {text!r} (use {UNIT_NAMES})")
    return round(float(number) * _UNITS[unit])


def format_percent(fraction: float | None) -> str:
    """A fraction as a whole percentage, ``format_percent(0.183) == '18 %'``; '-' for None."""
    return "-" if fraction is None else f"{100 * fraction:.0f} %"


def format_bytes(n: float) -> str:
    """Binary-prefixed size with three significant figures, e.g. ``format_bytes(1536) == '1.50 KiB'``."""
    if n < 0:
        return "-" + format_bytes(-n)
    if n < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if value < 1024 or unit == "PiB":
            break
    if value >= 100:
        return f"{value:.0f} {unit}"
    if value >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


# "Mb/s", "Gbit/s" and "bps" usually mean bits; parse_size would read "Mb" as megabytes
_BITS_RE = re.compile(r"[kKmMgGtT]b\b|bit|bps", re.ASCII)


def parse_bandwidth(value: str | int | float) -> float:
    """Bytes per second in ``value``: "50MB/s", "1.5 GiB/s" (any unit of iobench.host.units), or a
    positive number of bytes/s. Raises ``ValueError`` saying what is allowed."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a bandwidth")
    if isinstance(value, int | float):
        rate = float(value)
    else:
        text = str(value).strip()
        if _BITS_RE.search(text):
            raise ValueError(
                f"{value!r} looks like bits per second; write bytes, e.g. '125MB/s' for 1 Gbit/s"
            )
        if not text.lower().endswith("/s"):
            raise ValueError(f"{value!r} has no '/s'; write a rate such as '50MB/s'")
        rate = float(parse_size(text[:-2].strip()))
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"{value!r} is not a bandwidth above 0")
    return rate
