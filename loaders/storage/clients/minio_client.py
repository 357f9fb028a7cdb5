"""The MinIO Python SDK (``minio``): urllib3 underneath, every request on the calling thread.

Its retries are urllib3's (5 by default, on 5xx and broken connections): turned off by handing it
a pool of our own with ``retries=False``. Credentials the usual way for MinIO's SDK: given
explicitly, else AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (and the session token), MINIO_ACCESS_KEY/
MINIO_SECRET_KEY, the AWS credentials file (its profile: the tier's, else AWS_PROFILE), then the
instance's IAM role.
"""

from __future__ import annotations

import urllib3
from minio import Minio
from minio.credentials import (
    AWSConfigProvider,
    ChainedProvider,
    EnvAWSProvider,
    EnvMinioProvider,
    IamAwsProvider,
)
from minio.error import S3Error, ServerError

from loaders.observe.counters import FaultKind
from loaders.storage.clients.base import (
    STREAM_CHUNK,
    ClientSettings,
    ObjectClient,
    RangeSink,
    Write,
    finals_raised,
    plain_etag,
    raise_final,
    split_url,
)
from loaders.storage.faults import RETRYABLE_CODES, classify

MISSING = ("NoSuchKey", "NoSuchBucket", "ResourceNotFound")
DENIED = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")


class MinioClient(ObjectClient):
    def __init__(self, settings: ClientSettings) -> None:
        super().__init__(settings)
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=settings.connect_timeout_s, read=settings.read_timeout_s),
            maxsize=max(10, settings.connections),
            retries=False,  # ours only: counted, jittered, bounded
        )
        host = settings.host_port or "s3.amazonaws.com"
        self.client = Minio(
            host,
            access_key=settings.key,
            secret_key=settings.secret,
            session_token=settings.token,
            secure=settings.secure,
            region=settings.region,
            http_client=http,
            credentials=None
            if settings.key
            else ChainedProvider(
                [
                    EnvAWSProvider(),
                    EnvMinioProvider(),
                    AWSConfigProvider(profile=settings.profile),
                    IamAwsProvider(),
                ]
            ),
        )

    def head(self, url: str) -> tuple[int, str | None]:
        bucket, key = split_url(url)
        with finals_raised(url, _raise_plain, S3Error, ServerError):
            stat = self.client.stat_object(bucket, key)
        return int(stat.size or 0), plain_etag(stat.etag)

    def get_into(self, url: str, start: int, end: int, write: Write) -> int:
        if end <= start:
            return 0
        bucket, key = split_url(url)
        with finals_raised(url, _raise_plain, S3Error, ServerError):
            response = self.client.get_object(bucket, key, offset=start, length=end - start)
        sink = RangeSink(start, end, write)
        try:
            for piece in response.stream(STREAM_CHUNK, decode_content=False):
                if not sink.take(piece):
                    break
        finally:
            response.close()
            response.release_conn()
        return sink.received

    def classify(self, exc: BaseException) -> FaultKind | None:
        if isinstance(exc, S3Error):
            return "throttled_or_5xx" if exc.code in RETRYABLE_CODES else None
        if isinstance(exc, ServerError):
            return "throttled_or_5xx" if exc.status_code >= 500 else None
        if isinstance(exc, urllib3.exceptions.ProtocolError) and "IncompleteRead" in str(exc):
            return "truncated_body"
        if isinstance(exc, urllib3.exceptions.NewConnectionError):  # a ConnectTimeoutError subclass
            return "connect_failed"  # refused, unreachable or no such host: no timeout
        return classify(exc)


def _raise_plain(exc: S3Error | ServerError, url: str) -> None:
    """A missing object or refused access raised as such; anything else is the caller's to raise."""
    code = exc.code if isinstance(exc, S3Error) else str(exc.status_code)
    if code in MISSING or code == "404":
        raise_final("missing", url, str(code), exc)
    if code in DENIED or code == "403":
        raise_final("denied", url, str(code), exc)
