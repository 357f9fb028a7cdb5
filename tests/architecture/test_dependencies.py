"""The package says what the code needs, CI says what it installs: no upper bound on s3fs in
pyproject.toml (a user with next month's s3fs can install iobench beside it), boto3 and botocore
bounded where aiobotocore bounds botocore (so pip does not walk down boto3's releases), and
.ci/constraints.txt pins them exactly, together (aiobotocore pins botocore; boto3 moves with
botocore)."""

from __future__ import annotations

import re

from tests.helpers.paths import ROOT

CLIENTS = ("s3fs", "aiobotocore", "botocore", "boto3")


def _requirement(name: str) -> str | None:
    # the requirement's string as written (tomllib is Python 3.11+; iobench supports 3.10)
    found = re.search(rf'^\s*"({name}\b[^"]*)"', (ROOT / "pyproject.toml").read_text(), re.M)
    return found.group(1) if found else None


def test_s3fs_has_no_upper_bound_and_boto_is_bounded_where_aiobotocore_bounds_botocore():
    req = _requirement("s3fs")
    assert req is not None and "<" not in req and "~=" not in req and "==" not in req, req
    # boto3 1.X.Y needs botocore >= 1.X.Y: bounded where the installed aiobotocore bounds botocore, a
    # fresh resolve takes a matching boto3 at once instead of walking down its releases
    from importlib.metadata import requires

    ceiling = next(
        m.group(1)
        for r in requires("aiobotocore") or ()
        if r.startswith("botocore") and (m := re.search(r"<\s*([\d.]+)", r))
    )
    for name in ("boto3", "botocore"):
        req = _requirement(name)
        assert req is not None and re.search(r"<\s*([\d.]+)", req), f"pyproject.toml: {name} unbounded"
        assert re.search(r"<\s*([\d.]+)", req).group(1) == ceiling, (req, ceiling)  # type: ignore[union-attr]


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
