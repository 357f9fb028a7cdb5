"""The package says what the code needs, CI says what it installs: no upper bound on the object
store's clients in pyproject.toml (a user with next month's s3fs can install iobench beside it),
and .ci/constraints.txt pins them exactly, together (aiobotocore pins botocore; boto3 moves with
botocore)."""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT

CLIENTS = ("s3fs", "aiobotocore", "botocore", "boto3")


def _requirement(name: str) -> str | None:
    # the requirement's string as written (tomllib is Python 3.11+; iobench supports 3.10)
    found = re.search(rf'^\s*"({name}\b[^"]*)"', (ROOT / "pyproject.toml").read_text(), re.M)
    return found.group(1) if found else None


def test_object_store_clients_have_no_upper_bound():
    for name in ("s3fs", "boto3"):
        req = _requirement(name)
        assert req is not None, f"pyproject.toml no longer requires {name}"
        assert "<" not in req and "~=" not in req and "==" not in req, f"pyproject.toml bounds {req!r}"


def test_ci_pins_the_clients_exactly():
    pins = dict(
        line.split("==", 1)
        for line in (ROOT / ".ci" / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    for name in CLIENTS:
        assert re.fullmatch(r"\d+(\.\d+)+", pins.get(name, "")), (
            f".ci/constraints.txt: {name} not pinned exactly"
        )
