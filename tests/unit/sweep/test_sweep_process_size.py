"""The sweep's own process stays small: it lives beside its cells in one memory limit, so what it
does before a cell starts (its plan, the decoder's name and rate, the estimates, the checks) must
not import torch or OpenCV, which the cells import for themselves (over 100 MB of memory here)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "cv2", "nvidia.dali")

SWEEP_BEFORE_A_CELL = f"""
import sys
from iobench.analysis import decoderate
from iobench.sweep import cli, runner, supervise
from iobench.sweep.estimate import estimate_plan
from iobench.sweep.config import load_config
rate = decoderate.resolve()
config = load_config(None, [])
estimate_plan(config.datasets, config.cells(), rate)
assert rate.decoder or rate.kind == "assumed", rate
print(sorted(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_the_sweep_plans_its_cells_without_importing_what_the_cells_import():
    proc = subprocess.run(
        [sys.executable, "-c", SWEEP_BEFORE_A_CELL], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[-2] == "[]"
