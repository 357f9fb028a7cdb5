"""S3-compatible object storage (MinIO, Ceph RGW, AWS S3), optionally behind a bounded local
NVMe shard cache.

Credentials come from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, as written by
`iobench lab up` into DIR/env) or an AWS profile — never from the sweep file, so they cannot end
up in results. The endpoint comes from the tier's `endpoint_url` or AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from typing import Any, ClassVar

from .base import CacheState, Option, Tier, TierConfigError, classify_fraction

_SIZE_HELP = "a size such as 20GB or 512MiB"


def endpoint_from_env() -> str | None:
    return (
        os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or os.environ.get("S3_ENDPOINT_URL")
    )


def s3_storage_options(
    endpoint_url: str | None, region: str | None, path_style: bool, profile: str | None = None
) -> dict[str, Any]:
    """fsspec/s3fs options; credentials stay in the environment or the profile."""
    client: dict[str, Any] = {}
    if endpoint_url:
        client["endpoint_url"] = endpoint_url
    if region or os.environ.get("AWS_DEFAULT_REGION"):
        client["region_name"] = region or os.environ["AWS_DEFAULT_REGION"]
    options: dict[str, Any] = {
        "client_kwargs": client,
        # fail fast on a dead endpoint: the retry policy above decides how long to keep trying
        "config_kwargs": {
            "connect_timeout": 5,
            "read_timeout": 60,
            "s3": {"addressing_style": "path" if path_style else "auto"},
        },
    }
    if profile:
        options["profile"] = profile
    return options


class S3Tier(Tier):
    """A dataset under s3://bucket/prefix, read directly or through a local shard cache."""

    kind: ClassVar[str] = "s3"
    options: ClassVar[dict[str, Option]] = {
        "url": Option(
            str, required=True, help="s3://bucket/prefix where `iobench dataset stage` put the dataset"
        ),
        "name": Option(str, help="label for reports"),
        "endpoint_url": Option(str, help="http(s)://host:port; default AWS_ENDPOINT_URL"),
        "region": Option(str, help="region name; default AWS_DEFAULT_REGION"),
        "path_style": Option(bool, default=True, help="path-style addressing (MinIO, Ceph RGW)"),
        "profile": Option(str, help="AWS profile holding the credentials"),
        "cache_dir": Option(str, help="local NVMe directory for the shard cache; omit to stream"),
        "cache_size": Option((str, int), help=_SIZE_HELP),
        "part_size": Option((str, int), default="8MiB", help="ranged GET size, " + _SIZE_HELP),
        "concurrency": Option(int, default=4, help="ranged GETs in flight per reader"),
        "stage": Option(bool, default=False, help="upload the sweep's dataset to url first (idempotent)"),
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        from ..units import parse_size

        url = self.config["url"].rstrip("/")
        if not url.startswith("s3://") or len(url) <= 5:
            raise TierConfigError(f"s3 tier: url={url!r} must look like s3://bucket/prefix")
        self.url = url
        self.bucket = url[5:].split("/", 1)[0]
        self.name = self.config["name"] or f"s3-{self.bucket}"
        self.endpoint_url = self.config["endpoint_url"] or endpoint_from_env()
        try:
            self.cache_bytes = parse_size(self.config["cache_size"]) if self.config["cache_size"] else None
            self.part_bytes = parse_size(self.config["part_size"])
        except ValueError as exc:
            raise TierConfigError(f"s3 tier: {exc}; write {_SIZE_HELP}") from None
        if self.cache_bytes and not self.config["cache_dir"]:
            raise TierConfigError("s3 tier: cache_size is set but cache_dir is not; give both or neither")
        self.cache_dir = (
            os.path.abspath(os.path.expanduser(self.config["cache_dir"]))
            if self.config["cache_dir"]
            else None
        )

    # -- reaching the data ----------------------------------------------------------------
    def dataset_dir_or_url(self) -> str:
        return self.url

    def storage_options(self) -> dict[str, Any]:
        return s3_storage_options(
            self.endpoint_url, self.config["region"], self.config["path_style"], self.config["profile"]
        )

    def _reader(self):
        from loaders.objectstore import ObjectReader

        return ObjectReader(
            self.storage_options(), part_bytes=self.part_bytes, concurrency=self.config["concurrency"]
        )

    def load_manifest(self) -> Any:
        from ..datasets.manifest import MANIFEST_NAME, Manifest, ManifestError

        reader = self._reader()
        where = f"{self.url}/{MANIFEST_NAME}"
        try:
            size = reader.info(where)["size"]
            raw = json.loads(reader.read_range(where, 0, size))
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{where}: not valid JSON: {exc}") from None
        except OSError as exc:
            raise OSError(
                f"s3 tier {self.name!r}: cannot read {where} from {self.endpoint_url or 'AWS'}: {exc}. "
                "Check the endpoint, the credentials in the environment (source DIR/env after "
                "`iobench lab up`) and that the dataset was staged (`iobench dataset stage`)."
            ) from None
        finally:
            reader.close()
        return Manifest.from_dict(raw, where=where)

    def shard_urls(self, manifest: Any) -> list[str]:
        return [f"{self.url}/{s.name}" for s in manifest.shards]

    def stage_dataset(self, dataset_dir: str) -> str:
        from ..datasets.stage import stage

        r = stage(
            dataset_dir,
            self.url,
            endpoint_url=self.endpoint_url,
            region=self.config["region"],
            profile=self.config["profile"],
        )
        return f"{self.url}: {len(r.uploaded)} uploaded, {len(r.skipped)} already there ({r.verified})"

    def source_options(self, manifest: Any) -> dict[str, Any]:
        urls = self.shard_urls(manifest)
        return {
            "storage_options": self.storage_options(),
            "cache_dir": self.cache_dir,
            "cache_bytes": self.cache_bytes,
            "shard_sizes": {u: s.bytes for u, s in zip(urls, manifest.shards, strict=True)},
            "part_bytes": self.part_bytes,
            "concurrency": self.config["concurrency"],
        }

    # -- cache state ----------------------------------------------------------------------
    def prepare(self, manifest: Any, cache: str) -> CacheState:
        self.check_cache_mode(cache)
        total = manifest.total_bytes
        server_note = (
            "server-side caches (RGW/MinIO memory, the OSDs' or disks' caches) cannot be "
            "controlled from the client and may flatter repeated reads"
        )
        if not self.cache_dir:
            return CacheState(
                requested=cache,
                method="none (streamed, no local cache)",
                resident_bytes_before=0,
                total_bytes=total,
                resident_fraction_before=0.0,
                achieved="cold" if cache == "cold" else "unknown",
                note=f"every byte comes over the network from {self.endpoint_url or 'S3'}; {server_note}",
            )
        from loaders.cache import ShardCache

        shard_cache = ShardCache(self.cache_dir, self.cache_bytes or _default_cache_bytes(self.cache_dir))
        urls = self.shard_urls(manifest)
        method = "none"
        if cache == "cold":
            shard_cache.clear()
            method = "local shard cache cleared"
        elif cache == "warm":
            reader = self._reader()
            try:
                for url, entry in zip(urls, manifest.shards, strict=True):
                    if entry.bytes <= shard_cache.max_bytes:
                        shard_cache.get(
                            url, lambda u, out, n=entry.bytes: reader.download(u, out, n), size=entry.bytes
                        )
            finally:
                reader.close()
            method = "local shard cache filled (LRU; a cache smaller than the dataset keeps its last shards)"
        cached = sum(s.bytes for u, s in zip(urls, manifest.shards, strict=True) if shard_cache.contains(u))
        fraction = cached / total if total else 0.0
        return CacheState(
            requested=cache,
            method=method,
            resident_bytes_before=cached,
            total_bytes=total,
            resident_fraction_before=fraction,
            achieved=classify_fraction(fraction),
            note=(
                f"{100 * fraction:.0f} % of the dataset is in the local cache "
                f"({self.cache_dir}, limit {shard_cache.max_bytes / 1e9:.2f} GB); {server_note}"
            ),
        )

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "url": self.url,
            "endpoint_url": self.endpoint_url or "AWS default",
            "region": self.config["region"] or os.environ.get("AWS_DEFAULT_REGION"),
            "path_style": self.config["path_style"],
            "part_bytes": self.part_bytes,
            "concurrency": self.config["concurrency"],
            "credentials_from": "profile " + self.config["profile"]
            if self.config["profile"]
            else "environment",
            "server": _server_header(self.endpoint_url),
        }
        if self.cache_dir:
            out["cache"] = {
                "dir": self.cache_dir,
                "limit_bytes": self.cache_bytes or _default_cache_bytes(self.cache_dir),
                "free_bytes": shutil.disk_usage(self.cache_dir).free
                if os.path.isdir(self.cache_dir)
                else None,
            }
        return out


def _default_cache_bytes(directory: str) -> int:
    from loaders.sources import default_cache_bytes

    return default_cache_bytes(directory)


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
