"""S3-compatible object storage (MinIO, Ceph RGW, AWS S3), optionally behind a bounded shard
cache on local NVMe or in RAM (see remote.py).

Credentials come from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, as written by
`iobench lab up` into DIR/env) or an AWS profile — never from the sweep file, so they cannot end
up in results. The endpoint and region are resolved as botocore resolves them (resolve_s3), and
handed to whichever object client reads the tier (``client``: loaders/storage/clients/).
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any, ClassVar

from loaders.storage import CLIENT_NAMES, DEFAULT_CLIENT, ResolvedClient, describe_client, resolve_client

from .base import DEFAULT_DEADLINE_S, Option, TierConfigError
from .objectstore import OBJECT_STORE_OPTIONS, ObjectStoreTier


def resolve_s3(
    endpoint_url: str | None, region: str | None, profile: str | None
) -> tuple[str | None, str | None]:
    """The endpoint and region botocore would use, as every AWS tool resolves them: the given ones,
    else ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL`` and the profile's ``endpoint_url`` (its ``s3``
    services section included), ``AWS_REGION``/``AWS_DEFAULT_REGION`` and the profile's ``region``;
    then ``S3_ENDPOINT_URL`` (older lab env files). AWS itself is None: botocore finds it again."""
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session(profile_name=profile)
    except botocore.exceptions.ProfileNotFound as exc:
        raise ValueError(f"s3 tier: profile {profile!r}: {exc}") from None
    region = region or session.region_name
    client = session.client("s3", endpoint_url=endpoint_url, region_name=region)
    endpoint: str = client.meta.endpoint_url
    host = urllib.parse.urlparse(endpoint).hostname
    assert host is not None, endpoint  # botocore's endpoint always names its host
    resolved = os.environ.get("S3_ENDPOINT_URL") if host.endswith(".amazonaws.com") else endpoint
    return resolved, region


def s3_storage_options(
    endpoint_url: str | None,
    region: str | None,
    path_style: bool,
    profile: str | None = None,
    deadline_s: float = DEFAULT_DEADLINE_S,
) -> dict[str, Any]:
    """fsspec/s3fs options; credentials stay in the environment or the profile.

    botocore waits at most ``deadline_s`` for the first byte and between bytes, and at most 5 s
    (or the deadline, if shorter) to connect (the reader bounds a request's retries by it too:
    SourceSpec.deadline_s)."""
    client: dict[str, Any] = {}
    if endpoint_url:
        client["endpoint_url"] = endpoint_url
    if region:
        client["region_name"] = region
    options: dict[str, Any] = {
        "client_kwargs": client,
        "config_kwargs": {
            "connect_timeout": min(5, deadline_s),
            "read_timeout": deadline_s,
            "s3": {"addressing_style": "path" if path_style else "auto"},
        },
    }
    if profile:
        options["profile"] = profile
    return options


class S3Tier(ObjectStoreTier):
    """A dataset under s3://bucket/prefix, streamed or read through a shard cache."""

    kind: ClassVar[str] = "s3"
    scheme: ClassVar[str] = "s3"
    options: ClassVar[dict[str, Option]] = {
        "url": Option(
            str, required=True, help="s3://bucket/prefix where `iobench dataset upload` put the dataset"
        ),
        "endpoint_url": Option(
            (str, list),
            help="http(s)://host:port, or a list of them (gateways of one store: reads spread over them); "
            "default as botocore resolves it (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, profile)",
        ),
        "region": Option(
            str, help="region name; default as botocore resolves it (AWS_REGION, AWS_DEFAULT_REGION, profile)"
        ),
        "path_style": Option(bool, default=True, help="path-style addressing (MinIO, Ceph RGW)"),
        "profile": Option(str, help="AWS profile holding the credentials"),
        "client": Option(
            str,
            default=DEFAULT_CLIENT,  # checked against the client registry (check_options), plugins included
            help=f"the object client that reads the tier: {', '.join(CLIENT_NAMES)}, or one another package "
            "registered; auto (default): the best measured one installed (docs/tiers.md)",
        ),
        **OBJECT_STORE_OPTIONS,
    }

    @classmethod
    def check_options(cls, options: Any) -> dict[str, Any]:
        config = super().check_options(options)
        try:
            client = resolve_client(config["client"], profile=bool(config["profile"]))
        except (ValueError, ImportError) as exc:
            raise TierConfigError(f"s3 tier: {exc}") from None
        if client == "s3dlio" and config["profile"]:
            raise TierConfigError(
                f"s3 tier: client s3dlio with profile {config['profile']!r}: s3dlio reads its credentials "
                "from the environment only; leave profile out and set AWS_PROFILE instead"
            )
        return config

    @classmethod
    def one_per_client(cls, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A tier mapping whose ``client`` is a list, as one mapping per client (its name suffixed
        with the client's: one cell each); any other mapping as it is."""
        clients = spec.get("client")
        if not isinstance(clients, list):
            return super().one_per_client(spec)
        if not clients or len(set(map(str, clients))) != len(clients):
            raise TierConfigError(f"s3 tier: client={clients!r}: a list names each client once")
        name = spec.get("name") or spec.get("kind", "s3")
        return [{**spec, "client": c, "name": f"{name}-{c}"} for c in clients]

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.bucket = self.container
        given = self.config["endpoint_url"]
        self.gateways: tuple[str, ...] = tuple(given) if isinstance(given, list) else ()
        if self.gateways:
            bad = [
                e
                for e in self.gateways
                if not isinstance(e, str) or not e.startswith(("http://", "https://"))
            ]
            if bad or len(self.gateways) < 2:
                raise TierConfigError(
                    f"s3 tier: endpoint_url={given!r}: a list holds two or more http(s)://host:port endpoints"
                )
        self.endpoint_url, self.region = resolve_s3(
            self.gateways[0] if self.gateways else given, self.config["region"], self.config["profile"]
        )
        # "auto" made the one that will read
        self.client: ResolvedClient = resolve_client(
            self.config["client"], profile=bool(self.config["profile"])
        )

    def client_name(self) -> ResolvedClient:
        return self.client

    def object_client(self) -> ResolvedClient | None:
        return self.client

    def storage_options(self) -> dict[str, Any]:
        return s3_storage_options(
            self.endpoint_url,
            self.region,
            self.config["path_style"],
            self.config["profile"],
            deadline_s=self.deadline_s,
        )

    def endpoints(self) -> tuple[str, ...]:
        return self.gateways

    def access_hint(self) -> str:
        return (
            f"Check the endpoint ({self.endpoint_url or 'AWS'}), the credentials in the environment "
            "(source DIR/env after `iobench lab up`) and that the dataset was uploaded (`iobench dataset upload`)."
        )

    def server_caches(self) -> str:
        return (
            "server-side caches (RGW/MinIO memory, the OSDs' or disks' caches) cannot be "
            "controlled from the client and may flatter repeated reads"
        )

    def upload_dataset(self, dataset_dir: str) -> str:
        from iobench.datasets.upload import upload_s3

        r = upload_s3(
            dataset_dir,
            self.url,
            endpoint_url=self.endpoint_url,
            region=self.region,
            profile=self.config["profile"],
        )
        return f"{self.url}: {len(r.uploaded)} uploaded, {len(r.skipped)} already there ({r.verified})"

    def describe_remote(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint_url or "AWS default",
            **({"endpoints": list(self.gateways)} if self.gateways else {}),
            "region": self.region,
            "path_style": self.config["path_style"],
            "credentials_from": f"profile {self.config['profile']}"
            if self.config["profile"]
            else "environment",
            "server": _server_header(self.endpoint_url),
            **describe_client(self.client),
        }


def _server_header(endpoint: str | None) -> str | None:
    """What the endpoint says it is (MinIO, Ceph RGW ...), from an anonymous HEAD: no credentials sent."""
    if not endpoint:
        return None
    try:
        with urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=3) as resp:
            return resp.headers.get("Server")
    except urllib.error.HTTPError as exc:
        return exc.headers.get("Server")
    except (OSError, ValueError):
        return None
