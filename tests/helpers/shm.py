"""What torch, multiprocessing or the loaders leave in /dev/shm (other tests on the host make their own)."""

from __future__ import annotations

import os
import time

OURS = ("torch_", "psm_", "sem.mp", "loaders")


def shm_entries() -> set[str]:
    return {name for name in os.listdir("/dev/shm") if name.startswith(OURS)}


def shm_left_beyond(before: set[str], seconds: float = 5.0) -> set[str]:
    """What is left in /dev/shm beyond ``before``, once the workers' own exit work is done (a
    spawned worker unlinks its semaphores as it exits, a little after the loader let it go)."""
    deadline = time.monotonic() + seconds
    while (extra := shm_entries() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    return extra
