"""A store of S3 objects for iobench's own writer (boto3): a part is the objects ``PREFIX/ID/NAME.00000``,
``.00001``, ... of one request each (every item starts on a stripe, so a request is one whole PUT,
``depth`` of them in flight), its length in ``NAME.length``; ``PREFIX/ID/.metadata``, written last,
is the commit.

Each PUT is atomic: an endpoint that dies mid-save leaves whole objects or none, never a torn one, and
no multipart upload to abort; the uncommitted objects are removed (abort) when the endpoint answers.
"""

from __future__ import annotations

from typing import Any

from iobench.datasets.upload import s3_client

from .errors import CheckpointMissing, EndpointFailed
from .store import METADATA_NAME


def _endpoint_error(what: str, exc: Exception, endpoint: str | None) -> EndpointFailed:
    return EndpointFailed(
        f"{what}: the S3 endpoint {endpoint or 'AWS'} failed ({type(exc).__name__}: {exc}); nothing of this "
        "checkpoint is committed (its metadata is written last); the objects it wrote are removed when the "
        "endpoint answers again"
    )


class S3Part:
    def __init__(self, store: S3Store, key: str) -> None:
        self.store, self.key = store, key
        self.end = 0

    def pwrite(self, data: memoryview, offset: int) -> int:
        index, inner = divmod(offset, self.store.stripe)
        if inner or len(data) > self.store.stripe:
            raise ValueError(f"{self.key}: an S3 part is written one stripe per request")
        self.store.put(f"{self.key}.{index:05d}", bytes(data))
        self.end = max(self.end, offset + len(data))
        return len(data)

    def close(self) -> None:
        self.store.put(f"{self.key}.length", str(self.end).encode())


class S3PartReader:
    def __init__(self, store: S3Store, key: str) -> None:
        self.store, self.key = store, key
        try:
            self.size = int(store.get(f"{key}.length"))
        except FileNotFoundError:
            raise CheckpointMissing(
                f"s3://{store.bucket}/{key} is missing: the checkpoint's metadata names it"
            ) from None

    def preadinto(self, buf: memoryview, offset: int) -> int:
        index, inner = divmod(offset, self.store.stripe)
        data = self.store.get(f"{self.key}.{index:05d}", inner, len(buf))
        buf[: len(data)] = data
        return len(data)

    def close(self) -> None:
        pass


class S3Store:
    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None,
        region: str | None,
        profile: str | None,
        stripe: int,
        deadline_s: float = 30.0,
    ) -> None:
        import botocore.config

        self.bucket, _, self.prefix = url[len("s3://") :].partition("/")
        self.prefix = self.prefix.strip("/")
        self.endpoint = endpoint_url
        client, _ = s3_client(endpoint_url, region, profile)
        # a dead endpoint fails a request within the deadline instead of retrying for minutes
        config = botocore.config.Config(
            connect_timeout=min(5.0, deadline_s),
            read_timeout=deadline_s,
            retries={"total_max_attempts": 2, "mode": "standard"},
            max_pool_connections=32,
        )
        self.client = _with_config(client, config)
        self.stripe = stripe
        self.item_alignment = stripe
        self.alignment = 1
        self.where = f"S3 {url} ({endpoint_url or 'AWS'})"

    def _key(self, checkpoint_id: str, name: str) -> str:
        return "/".join(p for p in (self.prefix, checkpoint_id, name) if p)

    def put(self, key: str, body: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
        except Exception as exc:
            raise _endpoint_error(f"writing s3://{self.bucket}/{key}", exc, self.endpoint) from None

    def get(self, key: str, offset: int = 0, length: int | None = None) -> bytes:
        ranged = {"Range": f"bytes={offset}-{offset + length - 1}"} if length else {}
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key, **ranged)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise FileNotFoundError(key) from None
        except Exception as exc:
            raise _endpoint_error(f"reading s3://{self.bucket}/{key}", exc, self.endpoint) from None

    def open_part(self, checkpoint_id: str, name: str) -> S3Part:
        return S3Part(self, self._key(checkpoint_id, name))

    def commit(self, checkpoint_id: str, metadata: bytes) -> None:
        self.put(self._key(checkpoint_id, METADATA_NAME), metadata)

    def abort(self, checkpoint_id: str) -> None:
        self.remove(checkpoint_id)

    def clear(self) -> None:
        """Every object under the prefix (a prefix of the caller's own)."""
        self.remove("")

    def remove(self, checkpoint_id: str) -> None:
        """Every object of the checkpoint, its metadata first (it stops being loadable before its
        parts go)."""
        base = self._key(checkpoint_id, "") + "/" if checkpoint_id or self.prefix else ""
        meta = self._key(checkpoint_id, METADATA_NAME)
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base)
        keys = sorted((o["Key"] for page in pages for o in page.get("Contents", [])), key=lambda k: k != meta)
        for key in keys:
            self.client.delete_object(Bucket=self.bucket, Key=key)

    def read_metadata(self, checkpoint_id: str) -> bytes:
        try:
            return self.get(self._key(checkpoint_id, METADATA_NAME))
        except FileNotFoundError:
            raise CheckpointMissing(
                f"no committed checkpoint at s3://{self.bucket}/{self._key(checkpoint_id, '')}"
            ) from None

    def open_reader(self, checkpoint_id: str, name: str) -> S3PartReader:
        return S3PartReader(self, self._key(checkpoint_id, name))

    def locate(self, checkpoint_id: str, name: str) -> str:
        return f"s3://{self.bucket}/{self._key(checkpoint_id, name)}"

    def local_files(self, checkpoint_id: str) -> list[str]:
        return []


def _with_config(client: Any, config: Any) -> Any:
    """``client`` remade with ``config`` merged into its own (the same credentials and endpoint)."""
    import boto3

    meta = client.meta
    return boto3.client(
        "s3", endpoint_url=meta.endpoint_url, region_name=meta.region_name, config=meta.config.merge(config)
    )
