"""A cell dies with the sweep that started it, workers included, so a killed sweep leaves no
process behind to publish a stale result into a run directory that is being resumed.

The sweep starts each cell as the leader of a new process group and names its own pid in
IOBENCH_SWEEP_PID. Linux then sends the cell SIGTERM when the sweep dies (PR_SET_PDEATHSIG), and
the cell's SIGTERM handler kills its whole group: loader workers, ceiling readers.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "IOBENCH_SWEEP_PID"
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    expected = os.environ.get(PARENT_ENV)
    if not expected or not sys.platform.startswith("linux"):
        return
    leader = os.getpid()
    if os.getpgid(0) != leader:  # not started by a sweep as a group leader: the group is not ours
        return

    def kill_group(signum: int, frame: object) -> None:
        if os.getpid() != leader:  # a forked worker inherited this handler: die alone, as by default
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        os.killpg(leader, signal.SIGKILL)

    signal.signal(signal.SIGTERM, kill_group)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != int(expected):  # the sweep died before the request above took effect
        os.killpg(leader, signal.SIGKILL)
