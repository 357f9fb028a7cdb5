"""A figure over several parts (ranks, epochs, saves) is known only when every part's is: a total
of the parts that were read would pass for all of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def every_known(values: Iterable[T | None]) -> list[T] | None:
    """The values when every one is known; None when any is not."""
    values = list(values)
    known = [v for v in values if v is not None]
    return known if len(known) == len(values) else None
