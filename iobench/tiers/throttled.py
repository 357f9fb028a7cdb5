"""Any tier behind an emulated slower link: a bandwidth cap shared by every reader on the host and
a latency per request, fixed or with a tail (see :mod:`loaders.storage.throttle` for the exact
definitions). Every process of a cell shares one bucket per host: the loader's workers, and in a
multi-rank cell every rank on the host. ``only_ranks`` throttles some ranks and not the others:
one slow node in a synchronous job.

On a host where every real tier is decode-bound, this makes fetch-bound cells on purpose, so the
stall attribution can be checked against a known bottleneck. Everything but the reads is the
inner tier's: URLs, manifest, staging, and cold/warm preparation (a throttled cold run is still
really cold underneath). With an inner shard cache, only misses cross the throttled link.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

import psutil

from iobench.host.units import parse_bandwidth
from iobench.results.choices import CacheMode
from loaders.storage import ResolvedClient, SourceSpec, ThrottleSpec, default_burst

from .base import CacheState, Option, Tier, TierConfigError

__all__ = ["ThrottledTier"]

BANDWIDTH_HELP = "bytes per second such as '50MB/s' or '200 MiB/s', or a number of bytes/s"


def _limits(config: Mapping[str, Any]) -> tuple[float | None, float, int]:
    """(bytes/s or None, latency in s, burst bytes or 0 for the default) from a checked config."""
    from iobench.host.units import parse_size

    rate = _parsed(config, "bandwidth", parse_bandwidth, BANDWIDTH_HELP)
    latency_ms = config["latency_ms"]
    if not (math.isfinite(latency_ms) and latency_ms >= 0):
        raise TierConfigError(
            f"throttled tier: latency_ms={latency_ms!r}: must be a number >= 0 (milliseconds)"
        )
    p99 = config["latency_p99_ms"]
    if p99 is not None and not (math.isfinite(p99) and p99 >= latency_ms > 0):
        raise TierConfigError(
            f"throttled tier: latency_p99_ms={p99!r}: must be >= latency_ms (the median, here {latency_ms!r}) > 0"
        )
    ranks = config["only_ranks"]
    if ranks is not None and not (
        ranks and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks)
    ):
        raise TierConfigError(
            f"throttled tier: only_ranks={ranks!r}: expected a list of ranks (integers >= 0)"
        )
    if rate is None and latency_ms == 0:
        raise TierConfigError(
            "throttled tier: give bandwidth (e.g. '50MB/s') and/or latency_ms > 0; with neither it throttles nothing"
        )
    burst = _parsed(config, "burst", parse_size, "a size above 0 such as '1MiB'")
    if burst is not None and burst <= 0:
        raise TierConfigError(f"throttled tier: burst={config['burst']!r}: must be above 0 bytes")
    return rate, latency_ms / 1000.0, int(burst or 0)


def _parsed(config: Mapping[str, Any], key: str, parse: Callable[[Any], float], allowed: str) -> float | None:
    """``config[key]`` as ``parse`` reads it (None when not given); what it refuses names the key."""
    if config[key] is None:
        return None
    try:
        return parse(config[key])
    except ValueError as exc:
        raise TierConfigError(f"throttled tier: {key}={config[key]!r}: {exc}; allowed: {allowed}") from None


class ThrottledTier(Tier):
    """``{kind: throttled, inner: {kind: local, path: ...}, bandwidth: 50MB/s, latency_ms: 2}``."""

    kind: ClassVar[str] = "throttled"
    options: ClassVar[dict[str, Option]] = {
        "inner": Option(
            Mapping, required=True, help="the tier read through the throttle, e.g. {kind: local, path: ...}"
        ),
        "bandwidth": Option((str, int, float), help=BANDWIDTH_HELP + "; omit for no cap"),
        "latency_ms": Option(
            (int, float),
            default=0,
            help="added once per request (shard or object opened); the median with latency_p99_ms",
        ),
        "latency_p99_ms": Option(
            (int, float), help="with it, each request's latency is lognormal: median latency_ms, this p99"
        ),
        "only_ranks": Option(
            list, help="throttle only these torch.distributed ranks; the others read the inner tier directly"
        ),
        "burst": Option((str, int), help="bucket depth, a size; default max(256KiB, 20 ms of bandwidth)"),
        "name": Option(str, help="label for reports"),
        "upload": Option(bool, default=False, help="upload the dataset to the inner tier first (idempotent)"),
    }

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        config = super().check_options(options)
        _limits(config)
        inner = config["inner"]
        if inner.get("kind") == cls.kind:
            # one SourceSpec carries one throttle: the inner one would be silently dropped
            raise TierConfigError(
                "throttled tier: inner is a throttled tier too; put bandwidth and latency_ms in one throttled tier"
            )
        if inner.get("upload"):
            raise TierConfigError(
                "throttled tier: set upload: true on the throttled tier, not inside inner (the sweep reads it there)"
            )
        from . import check_tier_spec  # the registry imports this module lazily: no import cycle

        try:
            check_tier_spec(inner)
        except ValueError as exc:
            raise TierConfigError(f"throttled tier: inner: {exc}") from None
        return config

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        from . import make_tier

        self.bytes_per_s, self.latency_s, burst = _limits(self.config)
        self.inner: Tier = make_tier(self.config["inner"])
        self.reads_block_devices = self.inner.reads_block_devices
        self.name = self.config["name"] or f"throttled-{getattr(self.inner, 'name', self.inner.kind)}"
        self.burst_bytes = burst or default_burst(self.bytes_per_s)
        self._state_path: str | None = None

    def object_client(self) -> ResolvedClient | None:
        return self.inner.object_client()

    def __getattr__(self, name: str) -> Any:
        # tier-specific extras (server_caches, access_hint, shard_paths ...) are the inner tier's
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def throttle_spec(self) -> ThrottleSpec:
        """The throttle with its bucket file, created on first use in a private temporary
        directory and removed when this process exits (worker processes only open it)."""
        if self._state_path is None:
            self._state_path = _new_state_file(self.config)
        p99 = self.config["latency_p99_ms"]
        return ThrottleSpec(
            bytes_per_s=self.bytes_per_s,
            latency_s=self.latency_s,
            latency_p99_s=p99 / 1000.0 if p99 is not None else None,
            burst_bytes=self.burst_bytes,
            state_path=self._state_path,
        )

    def dataset_dir_or_url(self) -> str:
        return self.inner.dataset_dir_or_url()

    def shard_urls(self, manifest: Any) -> list[str]:
        return self.inner.shard_urls(manifest)

    def storage_options(self) -> dict[str, Any]:
        return self.inner.storage_options()

    def load_manifest(self) -> Any:
        return self.inner.load_manifest()

    def object_url(self, name: str) -> str:
        return self.inner.object_url(name)

    def read_json(self, name: str) -> Any:
        return self.inner.read_json(name)

    def upload_dataset(self, dataset_dir: str) -> str:
        return self.inner.upload_dataset(dataset_dir)

    def throttles_this_rank(self) -> bool:
        """False on a rank that ``only_ranks`` leaves out (the rank torchrun gave this process)."""
        ranks = self.config["only_ranks"]
        return ranks is None or int(os.environ.get("RANK", "0")) in ranks

    def source(self, manifest: Any) -> SourceSpec:
        if not self.throttles_this_rank():
            return self.inner.source(manifest)
        return replace(self.inner.source(manifest), throttle=self.throttle_spec())

    @property
    def deadline_s(self) -> float | None:
        return self.inner.deadline_s

    def client_cache(self) -> tuple[str, str] | None:
        return self.inner.client_cache()

    def describe(self) -> dict[str, Any]:
        return {
            **self.inner.describe(),
            "throttle": {
                "bandwidth_bytes_per_s": self.bytes_per_s,
                "latency_ms": self.latency_s * 1000.0,
                "latency_p99_ms": self.config["latency_p99_ms"],
                "burst_bytes": self.burst_bytes,
                "only_ranks": self.config["only_ranks"],
            },
        }

    def prepare(self, manifest: Any, cache: CacheMode) -> CacheState:
        state = self.inner.prepare(manifest, cache)
        rate = f"{self.bytes_per_s / 1e6:.1f} MB/s" if self.bytes_per_s else "no bandwidth cap"
        return replace(
            state, note=f"{state.note}; reads throttled to {rate}, {self.latency_s * 1000:g} ms per request"
        )


STATE_PREFIX = "iobench-throttle-"
OWNER_FILE = "owner"


def _new_state_file(config: Mapping[str, Any]) -> str:
    """The bucket file. Under torchrun every rank of the job on this host opens the same one (named
    by the job's run id and this tier's settings): the host's link is shared, as a real one is.
    Otherwise a private one, which the loader's workers inherit through the spec.

    Its directory names the process whose life bounds it (``owner``): this one, or under torchrun
    the agent that outlives every rank. The owner's exit removes it; what a killed process left
    behind, the next throttled tier on the host removes."""
    # tmpfs when there is one: the bucket is updated on every read, and must never wait on a disk
    base = (
        "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    )
    _remove_orphans(base)
    job = os.environ.get("TORCHELASTIC_RUN_ID")
    if job:
        digest = hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
        directory = os.path.join(
            base, f"{STATE_PREFIX}{os.getuid()}-{re.sub(r'[^A-Za-z0-9]', '', job)}-{digest}"
        )
        os.makedirs(directory, mode=0o700, exist_ok=True)
        owner, remover = os.getppid(), (os.getpid() if os.environ.get("LOCAL_RANK", "0") == "0" else -1)
    else:
        directory = tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getuid()}-", dir=base)
        owner = remover = os.getpid()
    with open(os.path.join(directory, OWNER_FILE), "w") as f:
        f.write(str(owner))
    path = os.path.join(directory, "bucket")
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    atexit.register(_remove_state, directory, remover)  # the host's first rank cleans up
    return path


def _remove_state(directory: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child inherits the handler but not the ownership
        with contextlib.suppress(OSError):
            shutil.rmtree(directory)


def _remove_orphans(base: str) -> None:
    """Remove this user's bucket directories whose owner has exited (killed before its atexit)."""
    for name in os.listdir(base):
        if not name.startswith(f"{STATE_PREFIX}{os.getuid()}-"):
            continue
        directory = os.path.join(base, name)
        try:
            with open(os.path.join(directory, OWNER_FILE)) as f:
                owner = int(f.read())
        except (OSError, ValueError):  # being made right now, or not ours to judge
            continue
        if not psutil.pid_exists(owner):
            with contextlib.suppress(OSError):
                shutil.rmtree(directory)
