"""Terminal tables built from their column list: each report names its columns once, with how each
is justified."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import JustifyMethod
from rich.table import Table

Columns = Sequence[tuple[str, JustifyMethod]]


def with_columns(table: Table, columns: Columns, **options: Any) -> Table:
    """``table`` given a column per (heading, justification) of ``columns``, each with ``options``
    (rich's ``add_column`` keywords: overflow, width, ...)."""
    for heading, justify in columns:
        table.add_column(heading, justify=justify, **options)
    return table
