"""A cell dies with the sweep that started it, workers included, so a killed sweep leaves no
process behind to publish a stale result into a run directory that is being resumed.

The sweep starts each cell as the leader of a new process group and names its own pid in
IOBENCH_SWEEP_PID. Linux then sends the cell SIGTERM when the sweep dies (PR_SET_PDEATHSIG), and
the cell's SIGTERM handler kills its whole group: loader workers, ceiling readers. A multi-rank
cell is torchrun (tied to the sweep) and its ranks, each tied to torchrun the same way.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from iobench.cell.protocol import PARENT_ENV

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A cell (or a cell's torchrun) started by a sweep: dies with the sweep named in IOBENCH_SWEEP_PID."""
    expected = os.environ.get(PARENT_ENV)
    if expected:
        _tie_to(int(expected))


def die_with_launcher() -> None:
    """A rank started by torchrun, in a session of its own: dies with torchrun, workers included."""
    _tie_to(os.getppid())


def _tie_to(parent: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    leader = os.getpid()
    if os.getpgid(0) != leader:  # not started as a group leader: the group is not ours
        return

    def kill_group(signum: int, frame: object) -> None:
        if os.getpid() != leader:  # a forked worker inherited this handler: die alone, as by default
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        os.killpg(leader, signal.SIGKILL)

    signal.signal(signal.SIGTERM, kill_group)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request above took effect
        os.killpg(leader, signal.SIGKILL)
