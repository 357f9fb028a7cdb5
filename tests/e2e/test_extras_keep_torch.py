"""Every extra installs beside the user's torch without replacing it.

For each extra of pyproject.toml, pip resolves `pip install 'iobench[EXTRA]'` from this checkout into
the environment the tests run in, where torch is installed as the README installs it (2.13.0, CPU,
in CI), and must not plan to install any torch: no replacement, no CUDA libraries (--dry-run:
nothing is installed). A peer that requires torchvision fails it: each torchvision release requires
one torch release, and pip takes the newest, so `iobench[peers]` with litdata planned torch 2.14.1
and its CUDA 13 libraries in place of 2.13.0.

Needs the package index: under CI an index that does not answer fails the test, elsewhere it is
skipped with the reason."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version

import pytest

from tests.helpers.paths import ROOT

pytestmark = pytest.mark.slow  # a resolve against the index per extra: ten to twenty seconds each

RESOLVE_TIMEOUT_S = 300


def _extras() -> list[str]:
    # the [project.optional-dependencies] table's keys (tomllib is Python 3.11+; iobench supports 3.10)
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return re.findall(r"^([A-Za-z0-9_-]+)\s*=", table, re.M)


def _pip(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_CONSTRAINT", None)  # CI's pins would hide what a user's install resolves to
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def index_answers() -> None:
    """The package index answers (the versions of pip itself): under CI it must."""
    try:
        proc = _pip("index", "versions", "pip", timeout=120)
        reason = "" if proc.returncode == 0 else " ".join(proc.stderr.strip().splitlines()[-1:])
    except subprocess.TimeoutExpired:
        reason = "no answer within 120 s"
    if reason:
        message = f"the package index does not answer: {reason}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def test_the_extras_are_read_from_pyproject():
    assert {"html", "peers", "s3clients", "test"} <= set(_extras())


@pytest.mark.parametrize("extra", _extras())
def test_an_extra_keeps_the_installed_torch(extra, index_answers):
    torch = version("torch")
    proc = _pip(
        "install", "--dry-run", "--quiet", "--report", "-", f"{ROOT}[{extra}]", timeout=RESOLVE_TIMEOUT_S
    )
    assert proc.returncode == 0, f"iobench[{extra}] beside torch {torch}: {proc.stderr[-3000:]}"
    planned = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(proc.stdout)["install"]}
    assert "torch" not in planned, (
        f"pip install 'iobench[{extra}]' beside torch {torch} would install torch {planned['torch']} "
        f"with {', '.join(sorted(set(planned) - {'torch', 'iobench'}))}"
    )
