"""Why a cell failed, in two lines: the cause, and what to do about its likely reason.

    explain(exc, cell.tier)  ->  "DeadlineExceeded: GET s3://b/k (endpoint ...): no answer within ...
                                  hint: the storage stopped answering (a daemon down or overloaded), not
                                  the credentials; check s3://b/k at http://...: `iobench lab status` ..."

The likely reason comes from the error's class (and the words of the errors it wraps), never from
a guess about the tier: a timeout is not a credentials problem, a refused connection is not a
missing dataset. The traceback does not belong in a summary; the sweep keeps it in the cell's log.
"""

from __future__ import annotations

import errno
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from loaders.storage import exception_chain

MAX_CAUSE = 600  # characters of the first line; the full text is in the cell's log

_WORKER = re.compile(r"^Caught (\w+) in DataLoader worker process (\d+)\.\s*Original Traceback", re.S)


# what a failure's likely reason is: told from the error's classes (and, for an error a DataLoader
# worker re-raised as text, the words of its first line)
CauseKind = Literal[
    "deadline", "refused", "mount", "credentials", "missing", "throttled", "shm", "full", "oom", "other"
]


@dataclass(frozen=True)
class Cause:
    kind: CauseKind
    text: str  # the likely reason and what to do, one line


def _words(exc: BaseException | str) -> tuple[list[str], str]:
    """The class names of the error and those it wraps, and their text. A DataLoader worker's error
    counts by its own first line only: torch puts the worker's whole traceback in its message."""
    if isinstance(exc, str):
        return [], exc
    chain = exception_chain(exc)
    names = [k.__name__ for e in chain for k in type(e).__mro__]
    texts = [first_line(e) if _WORKER.match(str(e)) else f"{type(e).__name__}: {e}" for e in chain]
    return names, " ".join(texts)


_TIMEOUT_WORDS = (
    "DeadlineExceeded",
    "no answer within",
    "no progress within",
    "timed out",
    "Read timeout",
    "ReadTimeout",
    "ConnectTimeout",
    "TimedOut",
    "did not answer",
    "stalled",
)
_REFUSED_WORDS = (
    "Connection refused",
    "ConnectionRefused",
    "Could not connect",
    "Cannot connect",
    "EndpointConnectionError",
    "Errno 111",
    "has not answered before",  # a connect timeout at an endpoint that never answered (objectstore.py)
)


def likely_cause(exc: BaseException | str, where: str | None = None) -> Cause:
    """The likely reason for ``exc`` (an exception, or the text of one) and what to do, from its class."""
    names, text = _words(exc)
    place = f" ({where})" if where else ""
    if "CephFSMountGone" in names or "Transport endpoint is not connected" in text:
        return Cause("mount", f"the CephFS mount went away{place}: remount it (`iobench lab restart fuse`)")
    if any(w in text for w in _REFUSED_WORDS) or "ConnectionRefusedError" in names:
        return Cause(
            "refused",
            f"nothing answers at the endpoint{place}: the S3 server (radosgw, MinIO) is down or the endpoint "
            "is wrong, not a credentials or staging problem; check it (`iobench lab status`), start it "
            "(`iobench lab restart rgw`)",
        )
    if (
        any(n in names for n in ("DeadlineExceeded", "TimeoutError"))
        or any(w in text for w in _TIMEOUT_WORDS)
        or (isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT)
    ):
        return Cause(
            "deadline",
            f"the storage stopped answering{place}: a daemon is down, hung or overloaded (for Ceph: an OSD "
            "or the mon), not a credentials or staging problem; check it (`iobench lab status`, or the "
            "cluster's `ceph health`), mend it (`iobench lab restart DAEMON`), or raise the tier's "
            "deadline_s if it is only slow",
        )
    if (
        "PermissionError" in names
        or any(
            w in text
            for w in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "(403)", "Forbidden")
        )
        or "permission denied" in text.lower()
    ):
        return Cause(
            "credentials",
            f"the storage refused the credentials{place}: check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
            "(`. DIR/env` after `iobench lab up`), the profile, or the cephx user's caps",
        )
    if (
        "FileNotFoundError" in names
        or any(w in text for w in ("NoSuchBucket", "NoSuchKey", "no such bucket or object", "does not exist"))
        or "ObjectNotFound" in names
    ):
        return Cause(
            "missing",
            f"the dataset is not where the tier points{place}: stage it (`iobench dataset upload DATASET URL`, "
            "or the tier option upload: true)",
        )
    if any(w in text for w in ("SlowDown", "reduce your request rate", "ServiceUnavailable", " 503")):
        return Cause(
            "throttled",
            f"the server kept refusing requests as overloaded (SlowDown/5xx) past the retry budget{place}: "
            "lower the loader's concurrency or workers, or check the server's load",
        )
    if "shared memory" in text and "No space left" in text:  # torch's own, for a worker's batch
        return Cause(
            "shm",
            "the host's shared memory (/dev/shm) is full: DataLoader workers hand batches over through "
            "it. Give it more (`docker run --shm-size=2g`; Kubernetes: an emptyDir of medium Memory "
            "on /dev/shm), or run fewer workers or smaller batches",
        )
    if (
        "No space left" in text
        or "ENOSPC" in text
        or (isinstance(exc, OSError) and exc.errno == errno.ENOSPC)
    ):
        return Cause("full", f"a disk or the cluster is full{place}: free space, or lower cache_size")
    return Cause("other", "see the traceback in the cell's log (cell.log in its run directory)")


def out_of_memory(killed: int, where: str, memory: str) -> Cause:
    """The hint for a cell that failed while the kernel's OOM killer killed ``killed`` processes."""
    return Cause(
        "oom",
        f"out of memory: the kernel's OOM killer killed {killed} process(es) {where} while the cell ran "
        f"(memory: {memory}). Each DataLoader worker holds its prefetched batches and what it decodes: run "
        "fewer workers, smaller batches or a smaller prefetch_factor, a smaller RAM cache, or give the job "
        "more memory (`docker run --memory`; Kubernetes: resources.limits.memory)",
    )


_KILLED_WORDS = ("killed by SIGKILL", "killed by signal", "exited unexpectedly", "exitcode -9")


def blame_out_of_memory(message: str, returncode: int | None, oom: Cause) -> str:
    """A failed cell's ``message`` (a cause, then perhaps ``hint:``) once the OOM killer killed
    while it ran. An error that only says a process was killed (SIGKILL, a worker that vanished, a
    rank at -9) shows the symptom: its hint becomes ``oom``'s. Any other keeps its own hint, and
    the kill is said beside it."""
    if returncode == -signal.SIGKILL or any(w in message for w in _KILLED_WORDS):
        return message.split("\nhint: ", 1)[0] + f"\nhint: {oom.text}"
    return f"{message}\nalso: {oom.text}"


def exit_status(returncode: int) -> str:
    """What a process's return code says: its exit status, or the signal that killed it."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the cell's process was killed by {name}"
    return f"the cell exited with status {returncode}"


def tier_location(spec: Mapping[str, Any]) -> str:
    """Where a tier's data lives, from its sweep-file entry (no I/O): URL and endpoint, pool and
    cluster, or path."""
    kind = spec.get("kind")
    if kind == "throttled" and isinstance(spec.get("inner"), Mapping):
        return tier_location(spec["inner"])
    if kind == "s3":
        endpoint = (
            spec.get("endpoint_url")
            or os.environ.get("AWS_ENDPOINT_URL_S3")
            or os.environ.get("AWS_ENDPOINT_URL")
            or os.environ.get("S3_ENDPOINT_URL")
            or "AWS"
        )
        return f"{spec.get('url')} at {endpoint}"
    if kind == "rados":
        url = str(spec.get("url", ""))
        pool = url.removeprefix("rados://").split("/", 1)[0]
        conf = spec.get("conffile") or os.environ.get("CEPH_CONF") or "/etc/ceph/ceph.conf"
        return f"pool {pool} ({url}) of the cluster of {conf}"
    if spec.get("path"):
        return f"{kind} path {spec.get('path')}"
    return str(spec.get("url") or kind)


def first_line(exc: BaseException | str) -> str:
    """``Type: message`` of the error itself, one line; a DataLoader worker's error is unwrapped
    (torch re-raises it with the worker's whole traceback in its message)."""
    text = exc if isinstance(exc, str) else str(exc)
    name = "" if isinstance(exc, str) else type(exc).__name__
    suffix = ""
    worker = _WORKER.match(text)
    if worker:
        lines = [line for line in text.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else text
        qual, sep, msg = last.partition(": ")
        own = sep and " " not in qual
        name = qual.rsplit(".", 1)[-1] if own else worker.group(1)
        text = msg if own else last
        suffix = f" (in DataLoader worker {worker.group(2)})"
    text = _ERRNO.sub("", " ".join(text.split()))  # one line; "[Errno 110] " says nothing more
    if len(text) > MAX_CAUSE:
        text = text[: MAX_CAUSE - 1] + "…"
    return (f"{name}: {text}" if name else text) + suffix


_ERRNO = re.compile(r"\[Errno \d+\] ")


def explain(exc: BaseException | str, tier: Mapping[str, Any] | None = None) -> str:
    """Two lines for a summary's error: the cause, then ``hint:`` the likely reason and what to do."""
    where = tier_location(tier) if tier else None
    cause = first_line(exc)
    hint = likely_cause(exc, where)
    if hint.kind == "other":
        hint = likely_cause(cause, where)  # a worker's error: its own class is in its first line
    return f"{cause}\nhint: {hint.text}"
