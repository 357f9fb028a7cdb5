"""obstore: Rust's object_store behind a Python API; requests run on its tokio runtime's threads.

Its retries are turned off (``max_retries: 0``); its ``timeout`` bounds a whole request (the
deadline, as botocore's read timeout does between bytes). Credentials the usual way for obstore:
given explicitly, else the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_ENDPOINT_URL, ...); a profile through boto3's session (obstore's own
Boto3CredentialProvider).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import obstore
import obstore.exceptions
from obstore.store import S3Store

from loaders.observe.counters import FaultKind
from loaders.storage.clients.base import (
    ClientSettings,
    ObjectClient,
    finals_raised,
    plain_etag,
    raise_final,
    split_url,
)
from loaders.storage.clients.threadcpu import threads_named
from loaders.storage.faults import classify

if TYPE_CHECKING:
    from obstore.store import ClientConfig, S3Config  # stubs only: not importable at run time

_STATUS = re.compile(r"status code: (\d{3})")


class ObstoreClient(ObjectClient):
    def __init__(self, settings: ClientSettings) -> None:
        super().__init__(settings)
        self._config: S3Config = {"virtual_hosted_style_request": not settings.path_style}
        if settings.endpoint:
            self._config["endpoint"] = settings.endpoint
        if settings.region:
            self._config["region"] = settings.region
        if settings.key:
            self._config["access_key_id"] = settings.key
            if settings.secret is not None:  # given with its key (ClientSettings refuses half a pair)
                self._config["secret_access_key"] = settings.secret
            if settings.token:
                self._config["session_token"] = settings.token
        self._provider = None
        if settings.profile and not settings.key:
            import boto3
            from obstore.auth.boto3 import Boto3CredentialProvider

            self._provider = Boto3CredentialProvider(boto3.Session(profile_name=settings.profile))
        self._client_options: ClientConfig = {
            "allow_http": not settings.secure,
            "connect_timeout": timedelta(seconds=settings.connect_timeout_s),
            "timeout": timedelta(seconds=settings.read_timeout_s),
            "pool_max_idle_per_host": str(max(10, settings.connections)),
        }
        self._stores: dict[str, S3Store] = {}  # one per bucket: an S3Store names its bucket

    def _store(self, bucket: str) -> S3Store:
        store = self._stores.get(bucket)
        if store is None:
            store = self._stores[bucket] = S3Store(
                bucket,
                config=self._config,
                client_options=self._client_options,
                retry_config={
                    "max_retries": 0,  # ours only: counted, jittered, bounded
                    "backoff": {
                        "init_backoff": timedelta(seconds=0.05),
                        "max_backoff": timedelta(seconds=1),
                        "base": 2,
                    },
                    "retry_timeout": timedelta(seconds=self.settings.read_timeout_s),
                },
                credential_provider=self._provider,
            )
        return store

    def head(self, url: str) -> tuple[int, str | None]:
        bucket, key = split_url(url)
        with finals_raised(url, _raise_final, Exception):
            meta = obstore.head(self._store(bucket), key)
        return int(meta["size"]), plain_etag(meta.get("e_tag"))

    def get(self, url: str, start: int, end: int) -> bytes | memoryview:
        if end <= start:
            return b""
        bucket, key = split_url(url)
        with finals_raised(url, _raise_final, Exception):
            return memoryview(obstore.get_range(self._store(bucket), key, start=start, end=end))  # no copy

    def classify(self, exc: BaseException) -> FaultKind | None:
        text = str(exc)
        status = _STATUS.search(text)
        if status:
            return "throttled_or_5xx" if status.group(1).startswith("5") else None
        if "IncompleteBody" in text or "UnexpectedEof" in text or "kind: Body" in text:
            return "truncated_body"
        if "ConnectionRefused" in text or "Connection refused" in text:
            return "connect_failed"
        if "tcp connect error" in text and ("TimedOut" in text or "Elapsed" in text):
            return "connect_timeout"
        if "kind: Timeout" in text:
            return "timeout"
        # reset, or closed before its answer began (a gateway killed under a pooled connection)
        if "ConnectionReset" in text or "Connection reset" in text or "IncompleteMessage" in text:
            return "connection_reset"
        if "kind: Connect" in text:
            return "connect_failed"
        return classify(exc)

    def message(self, exc: BaseException) -> str:
        # obstore appends a dump of the error's sources: its first line says it, plus the OS's words
        os_words = re.search(r'message: "([^"]+)"', str(exc))
        first = super().message(exc)
        return f"{first} ({os_words.group(1)})" if os_words else first

    def thread_ids(self) -> set[int]:
        return threads_named("tokio-rt-worker")


def _raise_final(exc: Exception, url: str) -> None:
    if isinstance(exc, FileNotFoundError | obstore.exceptions.NotFoundError):
        raise_final("missing", url, "NotFound", exc)
    if isinstance(exc, PermissionError | obstore.exceptions.PermissionDeniedError):
        raise_final("denied", url, "PermissionDenied", exc)
    if isinstance(exc, obstore.exceptions.UnauthenticatedError):
        raise_final("denied", url, "Unauthenticated", exc)
