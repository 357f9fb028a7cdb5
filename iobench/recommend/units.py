"""Sizes and rates in the units the user wrote: decimal (GB, TB, GB/s) unless the sizes they gave
are binary (GiB, TiB), and one system on every line. A figure is printed with three significant
digits in the largest unit that keeps it at 1 or more, so a small rate reads "850 MB/s", never
"0.00 GB/s"."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

_DECIMAL = (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3))
_BINARY = (("PiB", 2.0**50), ("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10))
_BINARY_UNIT = re.compile(r"\d\s*[kmgtp]ib\b", re.IGNORECASE)
_DECIMAL_UNIT = re.compile(r"\d\s*[kmgtp]b\b", re.IGNORECASE)


def _three_digits(value: float) -> str:
    """Three significant digits, without trailing zeros: 1 TB, 1.2 TB, 30.7 TB, 258 GB."""
    if value >= 100:
        return f"{value:,.0f}"
    text = f"{value:.1f}" if value >= 10 else f"{value:.2f}"
    return text.rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Units:
    """How this answer prints bytes: decimal (the default) or binary prefixes, never both."""

    binary: bool = False

    def size(self, n: float) -> str:
        if not math.isfinite(n):
            return "unlimited"
        if n < 0:
            return "-" + self.size(-n)
        for unit, scale in _BINARY if self.binary else _DECIMAL:
            if n >= scale:
                return f"{_three_digits(n / scale)} {unit}"
        return f"{n:,.0f} B"

    def rate(self, bytes_per_s: float) -> str:
        return "unlimited" if not math.isfinite(bytes_per_s) else f"{self.size(bytes_per_s)}/s"


def units_of(given: Iterable[str | None]) -> Units:
    """Binary when the sizes the user gave (flags' values) use binary prefixes only, else decimal."""
    texts = [t for t in given if t]
    binary = any(_BINARY_UNIT.search(t) for t in texts)
    decimal = any(_DECIMAL_UNIT.search(t) for t in texts)
    return Units(binary=binary and not decimal)


def duration(seconds: float) -> str:
    """``5400`` -> "1.5 h"; minutes under an hour, days beyond two."""
    if not math.isfinite(seconds):
        return "never"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
