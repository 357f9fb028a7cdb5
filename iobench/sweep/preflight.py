"""What `iobench sweep --dry-run` checks before any cell runs: every tier built as its cells will
build it, the dataset directories read on this host, where each object tier's requests will go
(AWS itself when nothing names an endpoint), whether a generated dataset will be where a tier
reads it, and whether each endpoint takes a connection (a connect, never a request)."""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from iobench.datasets.manifest import MANIFEST_NAME
from iobench.sweep.config import SweepConfig
from iobench.sweep.datasetspec import DatasetSpec, bind_tier
from iobench.tiers import Tier, make_tier
from iobench.tiers.cachebooks import tier_option

CONNECT_TIMEOUT_S = 2.0
# botocore's order (iobench.tiers.s3.resolve_s3): the first one set names the endpoint
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL")

Level = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Finding:
    level: Level
    text: str


@dataclass(frozen=True)
class Preflight:
    findings: list[Finding]
    connected: int  # endpoints a connection was tried to (nothing sent)

    @property
    def errors(self) -> list[str]:
        return [f.text for f in self.findings if f.level == "error"]


@dataclass(frozen=True)
class _Built:
    index: int  # of the tier in the sweep file
    at: str  # "tiers[1] (minio)"
    spec: dict
    dataset: DatasetSpec
    tier: Tier


def preflight(config: SweepConfig, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> Preflight:
    """Every problem a dry run can find without running a cell (errors), what may be wrong
    (warnings), and where each object tier's requests go (notes), in the sweep file's order; a
    tier is said once, with its first dataset of a size sweep (its URL as written, {dataset} in it)."""
    findings = [f for d in config.datasets for f in _dataset(d, config)]
    built: list[_Built] = []
    for i, template in enumerate(config.tiers):
        at = f"tiers[{i}] ({template['name']})"
        for d in config.datasets:
            spec = bind_tier(template, d)
            if _reads_missing_dataset(spec, d):
                continue  # the dataset's own line says what is missing, or it is generated first
            try:
                built.append(_Built(i, at, spec, d, make_tier(spec)))
            except (ValueError, ImportError, OSError) as exc:
                findings.append(Finding("error", f"{at}: {exc}"))
                break  # the same again for the tier's other datasets
    endpoints = {e: b.at for b in built for e in _endpoints(b.tier)}
    refused = _connect_all(list(endpoints), connect_timeout_s)
    uploaded = {_place(b.tier) for b in built if b.spec.get("upload")}
    first = {b.index: b for b in reversed(built)}  # each tier with its first dataset
    readers: dict[str, list[str]] = {}  # tiers whose requests go to one place are said together
    for i, b in sorted(first.items()):
        shown = str(tier_option(config.tiers[i], "url") or b.tier.dataset_dir_or_url())
        if (destination := _destination(b.tier)) is not None:
            readers.setdefault(destination, []).append(f"{b.at} {shown}")
        if _place(b.tier) not in uploaded:
            findings += _generated_not_there(b, shown)
    findings += [Finding("note", f"{', '.join(who)}: requests go to {to}") for to, who in readers.items()]
    findings += [
        Finding(
            "warning",
            f"{at}: {e} did not take a connection ({refused[e]}): is the server up, and is this the "
            "right host and port?",
        )
        for e, at in endpoints.items()
        if e in refused
    ]
    order: dict[Level, int] = {"note": 0, "warning": 1, "error": 2}
    return Preflight(sorted(findings, key=lambda f: order[f.level]), len(endpoints))


def _place(tier: Tier) -> tuple[str, tuple[str, ...]]:
    """Where a tier's data is: its URL (or directory) and the endpoints that serve it."""
    return tier.dataset_dir_or_url(), _endpoints(tier)


def _reads_directory(spec: dict, dataset: DatasetSpec) -> bool:
    """The tier reads the dataset's directory on this host (a local tier, maybe throttled)."""
    path = tier_option(spec, "path")
    return isinstance(path, str) and Path(os.path.expanduser(path)).absolute() == dataset.path


def _reads_missing_dataset(spec: dict, dataset: DatasetSpec) -> bool:
    return not dataset.path.is_dir() and _reads_directory(spec, dataset)


def _dataset(d: DatasetSpec, config: SweepConfig) -> list[Finding]:
    """A dataset given by path: a directory with its manifest where a tier reads it on this host."""
    if d.synth is not None:
        return []
    if not d.path.exists():
        problem = f"dataset.path: {d.path} does not exist"
    elif not d.path.is_dir():
        problem = (
            f"dataset.path: {d.path} is a file; give the dataset's directory (the one with {MANIFEST_NAME})"
        )
    elif not (d.path / MANIFEST_NAME).is_file():
        problem = f"dataset.path: {d.path} holds no {MANIFEST_NAME}, so it is no dataset iobench made"
    else:
        return []
    bound = [bind_tier(t, d) for t in config.tiers]
    readers = [t["name"] for t in bound if t.get("upload") or _reads_directory(t, d)]
    if readers:
        make = (
            f"`iobench dataset pack IMAGEFOLDER --out {d.path}` packs an ImageFolder tree there, `iobench "
            f"dataset synth --out {d.path} --size 2GB` generates one; or write dataset: {{synth: {{size: 2GB}}}} "
            "to have the sweep generate it"
        )
        return [Finding("error", f"{problem}; tier {', '.join(readers)} reads it on this host. {make}")]
    return [
        Finding(
            "warning",
            f"{problem} on this host: the tiers read their own copies, but the estimate cannot count "
            "its samples",
        )
    ]


def _base(tier: Tier) -> Tier:
    """The tier that reaches the store (a throttled tier's inner one)."""
    return getattr(tier, "inner", None) or tier


def _destination(tier: Tier) -> str | None:
    """Where an object tier's requests go, and what said so; None for a tier of this host."""
    from iobench.tiers.rados import RadosTier
    from iobench.tiers.s3 import S3Tier

    base = _base(tier)
    if isinstance(base, RadosTier):
        return f"the Ceph cluster of {base.where()}"
    if not isinstance(base, S3Tier):
        return None
    if base.endpoint_url is None:
        region = base.region or "us-east-1 (none set: botocore's default)"
        return (
            f"AWS S3, region {region}: no endpoint_url in the tier, nor {', '.join(ENDPOINT_VARIABLES[:2])} "
            "or a profile's endpoint_url in this environment (for MinIO or Ceph RGW write endpoint_url: "
            "http://HOST:PORT)"
        )
    source = "endpoint_url" if base.config["endpoint_url"] else _endpoint_source(base.endpoint_url)
    region = f", region {base.region}" if base.region else ""
    return f"{', '.join(_endpoints(base))} ({source}{region})"


def _endpoint_source(resolved: str) -> str:
    named = [v for v in ENDPOINT_VARIABLES if os.environ.get(v) == resolved]
    return f"from {named[0]}" if named else "from the AWS profile"


def _generated_not_there(b: _Built, url: str) -> list[Finding]:
    """A dataset the sweep generates lands on this host: a tier reading elsewhere will not find
    it unless a tier of the same place uploads it first."""
    if b.dataset.synth is None:
        return []
    where = b.tier.dataset_dir_or_url()
    if "://" not in where:
        if Path(where) == b.dataset.path:
            return []
        return [
            Finding(
                "warning",
                f"{b.at} reads {url}, not the directory where the sweep generates the dataset "
                f"({b.dataset.path}): leave path out of a local tier to read the generated one",
            )
        ]
    return [
        Finding(
            "warning",
            f"{b.at} reads {url}, but the sweep generates the dataset on this host ({b.dataset.path}): "
            "it will not be there unless this tier, or another of the same store, has upload: true "
            f"(or upload it yourself: iobench dataset upload {b.dataset.path} {where})",
        )
    ]


def _endpoints(tier: Tier) -> tuple[str, ...]:
    """The S3 endpoints a tier's requests go to; none for AWS itself, which is not tried."""
    from iobench.tiers.s3 import S3Tier

    base = _base(tier)
    if not isinstance(base, S3Tier) or base.endpoint_url is None:
        return ()
    return base.gateways or (base.endpoint_url,)


def _connect_all(endpoints: list[str], timeout_s: float) -> dict[str, str]:
    """Why each endpoint that did not take a connection within ``timeout_s`` did not, all tried at
    once (a server may be started later: the caller warns, it does not refuse)."""
    answers: dict[str, str | None] = {}
    threads = [
        threading.Thread(target=lambda e=e: answers.__setitem__(e, _connect(e, timeout_s)), daemon=True)
        for e in endpoints
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 1.0)  # a name lookup may hang past the connect's own timeout
    late = f"no answer within {timeout_s:g} s"
    why = {e: answers.get(e, late) for e in endpoints}
    return {e: w for e, w in why.items() if w is not None}


def _connect(endpoint: str, timeout_s: float) -> str | None:
    """None when ``endpoint``'s host takes a TCP connection, else why not. Nothing is sent."""
    parts = urllib.parse.urlsplit(endpoint)
    port: Any = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
