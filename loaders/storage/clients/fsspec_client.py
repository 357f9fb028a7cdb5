"""s3fs (and any other fsspec filesystem: ``rados://``), as an object client.

s3fs's own retry loop and botocore's retries are turned off (``retries = 1``, botocore's
``total_max_attempts: 1``): every attempt is the reader's to count. What is left of aiohttp's own:
it resends an idempotent request once, at once, on a connection that broke before any answer (RFC
9112), unseen (docs/reliability.md).
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import fsspec
import fsspec.asyn

from loaders.storage.clients.base import (
    STREAM_CHUNK,
    ClientSettings,
    ObjectClient,
    RangeSink,
    Write,
    plain_etag,
)
from loaders.storage.faults import describe_error


class FsspecClient(ObjectClient):
    """Reads through an fsspec filesystem: ``info`` is the HEAD, ``cat_file`` a ranged GET; an S3
    body is streamed through s3fs' own botocore client."""

    own_retries: ClassVar[str | None] = (
        "aiohttp resends a GET or HEAD once, at once, when its connection broke before any answer"
    )

    def __init__(self, settings: ClientSettings, *, protocol: str = "s3", filesystem: Any = None) -> None:
        super().__init__(settings)
        self.protocol = protocol
        options = dict(settings.storage_options)
        if filesystem is not None:
            self.fs = filesystem
        elif protocol == "s3":
            config = dict(options.get("config_kwargs") or {})
            # botocore's "max_attempts" counts retries (1 would mean two tries); the total is what we want
            config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
            client = {**(options.get("client_kwargs") or {})}
            if settings.endpoint:
                client["endpoint_url"] = settings.endpoint
            # a fresh instance: fsspec caches filesystems by arguments, which would pin old credentials
            self.fs = fsspec.filesystem(
                "s3",
                skip_instance_cache=True,
                **{**options, "config_kwargs": config, "client_kwargs": client},
            )
            self.fs.retries = 1  # s3fs's own retry loop (a class attribute, not a constructor option)
        else:
            self.fs = fsspec.filesystem(protocol, skip_instance_cache=True, **options)

    @property
    def attempt_limits(self) -> str:
        if self.protocol == "s3":
            return super().attempt_limits
        options = self.settings.storage_options  # rados: librados' own limits (iobench.ceph.connection)
        return ", ".join(
            f"{what} {options[key]:g} s"
            for key, what in (("connect_timeout", "connect timeout"), ("op_timeout", "op timeout"))
            if isinstance(options.get(key), int | float)
        )

    def head(self, url: str) -> tuple[int, str | None]:
        info = self.fs.info(url)
        return int(info["size"]), plain_etag(info.get("ETag") or info.get("etag"))

    def get(self, url: str, start: int, end: int) -> bytes:
        return self.fs.cat_file(url, start=start, end=end)  # one body, read whole: one copy

    def get_into(self, url: str, start: int, end: int, write: Write) -> int:
        """An S3 body is streamed (s3fs' own client, as its get_file does); other stores' reads
        come whole. A server that ignores the Range is cut short past ``end`` (the caller sees the
        overrun)."""
        if end <= start:
            return 0
        fs = self.fs
        if not hasattr(fs, "_call_s3"):
            return super().get_into(url, start, end, write)
        bucket, key, version = fs.split_path(url)

        async def get() -> int:
            version_kw = {"VersionId": version} if version else {}
            response = await fs._call_s3(
                "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **version_kw
            )
            body, sink = response["Body"], RangeSink(start, end, write)
            try:
                while chunk := await body.read(STREAM_CHUNK):
                    if not sink.take(chunk):
                        break
            finally:
                body.close()
            return sink.received

        return fsspec.asyn.sync(fs.loop, get)

    def describe(self, exc: BaseException) -> str:
        return describe_error(exc)  # botocore's and s3fs's own words say what happened

    def thread_ids(self) -> set[int]:
        loop_thread = fsspec.asyn.iothread[0] if self.protocol == "s3" else None
        # native_id is None only before a thread starts; fsspec starts its loop's before storing it
        tid = loop_thread.native_id if isinstance(loop_thread, threading.Thread) else None
        return {tid} if tid is not None else set()
