"""Which failed cells the OOM killer's count may explain: those whose error is a process killed by a
signal with no word of why; any other error keeps its own hint."""

from __future__ import annotations

from iobench.tiers.faults import Cause, blame_out_of_memory, exit_status

OOM = Cause("oom", "out of memory")


def _killed(error: str, returncode: int) -> bool:
    """Whether the OOM hint took the place of the error's own (else it is added beside it)."""
    blamed = blame_out_of_memory(f"{error}\nhint: its own", returncode, OOM)
    assert blamed.startswith(error)
    return blamed.endswith("\nhint: out of memory")


def test_a_kill_without_a_reason_is_one_the_oom_killer_may_explain():
    assert _killed(exit_status(-9), -9)
    assert _killed("RuntimeError: DataLoader worker (pid(s) 30785) exited unexpectedly", 1)
    assert _killed("RuntimeError: DataLoader worker (pid 30785) is killed by signal: Killed.", 1)
    assert _killed("torchrun: host n1, rank 1, exitcode -9", 1)


def test_an_error_with_its_own_reason_keeps_it():
    assert not _killed("DeadlineExceeded: GET s3://b/k: no answer within 10 s", 1)
    assert not _killed("PermissionError: [Errno 13] Permission denied: '/data/train-000.tar'", 1)
    assert exit_status(-7) == "the cell's process was killed by SIGBUS" and exit_status(3).endswith(
        "status 3"
    )
