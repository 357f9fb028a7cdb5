"""What the fault-injection tests share: the samples a dataset must deliver, a dataset staged in
the lab, a lab daemon killed with kill -9, an independent check that a shard cache holds nothing
torn, stale or locked, and the hypothesis settings and hang guard of the hostile-input tests."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from hypothesis import HealthCheck, settings

from iobench.datasets.manifest import Manifest
from iobench.lab.conf import LabPaths
from iobench.lab.daemons import alive, live_daemons
from loaders.formats.tar import iter_samples
from loaders.storage.shardcache_index import key_of

# property-based tests: modest counts (the CI budget), no per-example deadline (a loaded CI box)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextlib.contextmanager
def no_hang(seconds: float = 10.0) -> Iterator[None]:
    """Fail (TimeoutError) instead of hanging: a parser stuck in a loop is a failure like any other."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def dataset_pairs(directory: str | Path) -> Counter:
    """The (key, label) multiset of a local WebDataset directory, read straight from its tars."""
    out: Counter = Counter()
    for shard in sorted(Path(directory).glob("*.tar")):
        with open(shard, "rb") as f:
            out.update((s.key, int(s.parts["cls"])) for s in iter_samples(f, str(shard)))
    return out


def stage_copy(ceph_lab, dataset: str | Path, what: str) -> str:
    """Stage ``dataset`` into a fresh bucket of the lab (straight to radosgw, no faults); its URL."""
    from iobench.datasets.upload import upload_s3

    url = f"s3://{what}-{uuid.uuid4().hex[:8]}/tiny"
    upload_s3(dataset, url, endpoint_url=ceph_lab.env["AWS_ENDPOINT_URL"])
    return url


class Staged(NamedTuple):
    """A dataset staged in the lab: its URL there, its manifest and the samples it must deliver."""

    url: str
    manifest: Manifest
    want: Counter


def staged_dataset(ceph_lab, dataset: str | Path, what: str) -> Staged:
    """``dataset`` staged into a fresh bucket of the lab (:func:`stage_copy`), with what to check
    a read of it against."""
    return Staged(stage_copy(ceph_lab, dataset, what), Manifest.load(dataset), dataset_pairs(dataset))


def cache_problems(cache_dir: str | Path, want_sha256: dict[str, str]) -> list[str]:
    """Everything wrong with a shard cache at rest: a temp file left behind, an entry whose bytes are
    not the shard's (torn, short, stale), a file the cache did not make, or a lock still held.

    ``want_sha256`` maps each shard URL that may be cached to its sha256 (from the manifest). Reads
    the directory itself rather than trusting the cache's own scan.
    """
    directory = Path(cache_dir)
    by_key = {key_of(url): (url, sha) for url, sha in want_sha256.items()}
    problems = []
    for path in directory.iterdir():
        if path.name in (".lock", ".locks", ".sums"):
            continue
        if path.name.startswith(".part-"):
            problems.append(f"{path.name}: a download's temp file was left behind")
            continue
        url, sha = by_key.get(path.name[:64], (None, None))
        if url is None:
            problems.append(f"{path.name}: not an entry of any expected shard")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            problems.append(f"{path.name}: bytes differ from {url} (torn or stale entry)")
    locks = [directory / ".lock", *sorted((directory / ".locks").iterdir())]
    for lock in locks:
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            problems.append(f"{lock.name}: lock still held")
        finally:
            os.close(fd)
    return problems


def kill9(lab, name: str) -> tuple[int, float]:
    """kill -9 the lab's daemon ``name`` (its pid from this lab's own pid file); (pid, when)."""
    pid = live_daemons(LabPaths(lab.dir))[name]
    os.kill(pid, signal.SIGKILL)
    t = time.monotonic()
    while alive(pid) and time.monotonic() - t < 10:
        time.sleep(0.01)
    return pid, t
