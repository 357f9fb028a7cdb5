"""`iobench dataset upload DATASET s3://bucket/prefix`: upload shards, indexes and manifest.

The MinIO SDK does the uploads (parallel multipart for big shards, one client for MinIO, Ceph RGW
and AWS). Each object carries its sha256 as user metadata, so a re-run skips what is already
there and intact (idempotent), and verification compares the store against the manifest. The
manifest goes up last: a reader that finds it can trust the shards are complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, sha256_file
from iobench.datasets.objects import INDEX_NAME, OBJECTS_DIR, load_index

SHA_META = "sha256"


class UploadError(OSError):
    """Staging failed: names the object, the endpoint and what to do; never a credential."""


@dataclass
class UploadReport:
    url: str
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes_uploaded: int = 0
    verified: str = "size+sha256 metadata"
    created_bucket: bool = False


def split_s3_url(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"{url!r}: expected s3://bucket/prefix")
    return parsed.netloc, parsed.path.strip("/")


def minio_client(endpoint_url: str | None = None, region: str | None = None, profile: str | None = None):
    """A MinIO client for any S3 endpoint, with credentials resolved the way boto3 resolves them."""
    import boto3
    import urllib3
    from minio import Minio

    endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("S3_ENDPOINT_URL")
    if not endpoint_url:
        endpoint_url = "https://s3.amazonaws.com"
    parsed = urlparse(endpoint_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"endpoint_url={endpoint_url!r}: expected http(s)://host[:port]")
    creds = boto3.Session(profile_name=profile).get_credentials()
    if creds is None:
        raise UploadError(
            "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(`source DIR/env` after `iobench lab up`) or use an AWS profile"
        )
    frozen = creds.get_frozen_credentials()
    http = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=5, read=120),
        retries=urllib3.Retry(total=3, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
        maxsize=16,
    )
    client = Minio(
        parsed.netloc,
        access_key=frozen.access_key,
        secret_key=frozen.secret_key,
        session_token=frozen.token,
        secure=parsed.scheme == "https",
        region=region or os.environ.get("AWS_DEFAULT_REGION"),
        http_client=http,
    )
    return client, endpoint_url


def _explain(exc: Exception, what: str, endpoint: str) -> UploadError:
    code = getattr(exc, "code", None)
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied"):
        hint = "the credentials were refused: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
    elif code == "NoSuchBucket":
        hint = "the bucket does not exist"
    elif "MaxRetryError" in type(exc).__name__ or "Connection" in str(exc):
        hint = f"cannot reach {endpoint}: is the server up (iobench lab status)?"
    else:
        hint = str(exc)
    return UploadError(f"{what} at {endpoint}: {code or type(exc).__name__}: {hint}")


def upload_s3(
    dataset_dir: str | Path,
    url: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    profile: str | None = None,
    workers: int = 4,
    part_bytes: int = 16 * 2**20,
    verify: str = "metadata",
    progress: Callable[[int, int], None] | None = None,
) -> UploadReport:
    """Upload a complete local dataset to ``url``; ``verify="full"`` also reads every object back."""
    if verify not in ("metadata", "full"):
        raise ValueError(f"verify={verify!r}: allowed values are metadata, full")
    root = Path(dataset_dir)
    manifest = Manifest.load(root)
    bucket, prefix = split_s3_url(url)
    client, endpoint = minio_client(endpoint_url, region, profile)
    report = UploadReport(
        url=url.rstrip("/"),
        verified="size+sha256 metadata" if verify == "metadata" else "full read-back sha256",
    )
    try:
        if not client.bucket_exists(bucket):
            client.make_bucket(bucket)
            report.created_bucket = True
    except Exception as exc:
        raise _explain(exc, f"checking bucket {bucket!r}", endpoint) from None

    key_of = lambda name: f"{prefix}/{name}" if prefix else name  # noqa: E731

    def put(path: Path, name: str, sha: str) -> tuple[str, bool]:
        key = key_of(name)
        size = path.stat().st_size
        try:
            uploaded = not _already_there(client, bucket, key, size, sha)
            if uploaded:
                client.fput_object(
                    bucket, key, str(path), metadata={SHA_META: sha}, part_size=max(part_bytes, 5 * 2**20)
                )
            _verify(client, bucket, key, size, sha, full=verify == "full")
        except UploadError:
            raise
        except Exception as exc:
            raise _explain(exc, f"uploading {path} to s3://{bucket}/{key}", endpoint) from None
        return key, uploaded

    upload_all(upload_files(root, manifest), put, report, workers=workers, progress=progress)
    manifest_key = key_of(MANIFEST_NAME)
    try:
        client.fput_object(bucket, manifest_key, str(root / MANIFEST_NAME), content_type="application/json")
    except Exception as exc:
        raise _explain(exc, f"uploading the manifest to s3://{bucket}/{manifest_key}", endpoint) from None
    return report


def upload_files(root: Path, manifest: Manifest) -> list[tuple[Path, str, str | None]]:
    """(local path, name under the prefix, known sha256) of everything a dataset puts on a tier,
    in upload order: shards with their DALI indexes, then the per-sample objects and their index
    when the dataset has the objects layout. The manifest is not listed: it always goes last."""
    files: list[tuple[Path, str, str | None]] = []
    for entry in manifest.shards:
        files.append((root / entry.name, entry.name, entry.sha256))
        idx = (root / entry.name).with_suffix(".idx")
        if idx.exists():
            files.append((idx, idx.name, None))
    index = root / INDEX_NAME
    if index.exists():
        for sample in load_index(json.loads(index.read_text()), str(index)):
            files.append((root / OBJECTS_DIR / sample["name"], f"{OBJECTS_DIR}/{sample['name']}", None))
        files.append((index, INDEX_NAME, None))
    return files


def upload_all(
    files: list[tuple[Path, str, str | None]],
    put: Callable[[Path, str, str], tuple[str, bool]],
    report: UploadReport,
    *,
    workers: int,
    progress: Callable[[int, int], None] | None,
) -> None:
    """Run ``put(path, name, sha) -> (key, uploaded)`` over ``files`` in parallel, an objects index
    only after everything it lists, and keep the report and the progress count (thread-safe)."""
    lock = threading.Lock()
    done = 0

    def one(item: tuple[Path, str, str | None]) -> None:
        nonlocal done
        path, name, sha = item
        key, uploaded = put(path, name, sha or sha256_file(path))
        with lock:
            if uploaded:
                report.uploaded.append(key)
                report.bytes_uploaded += path.stat().st_size
            else:
                report.skipped.append(key)
            done += 1
            if progress:
                progress(done, len(files))

    body, indexes = split_indexes(files)
    with ThreadPoolExecutor(max(1, workers)) as pool:
        list(pool.map(one, body))
    for item in indexes:
        one(item)


def split_indexes(files: list[tuple[Path, str, str | None]]) -> tuple[list, list]:
    """The files, and apart from them the objects index that must be uploaded after them."""
    return [f for f in files if f[1] != INDEX_NAME], [f for f in files if f[1] == INDEX_NAME]


def _already_there(client, bucket: str, key: str, size: int, sha: str) -> bool:
    from minio.error import S3Error

    try:
        st = client.stat_object(bucket, key)
    except S3Error as exc:
        if exc.code in ("NoSuchKey", "NoSuchObject", "ResourceNotFound"):
            return False
        raise
    meta = {k.lower(): v for k, v in (st.metadata or {}).items()}
    return st.size == size and meta.get(f"x-amz-meta-{SHA_META}") == sha


def _verify(client, bucket: str, key: str, size: int, sha: str, *, full: bool) -> None:
    if not _already_there(client, bucket, key, size, sha):
        raise UploadError(f"s3://{bucket}/{key}: after upload the store reports a different size or sha256")
    if full:
        digest = hashlib.sha256()
        response = client.get_object(bucket, key)
        try:
            for chunk in response.stream(2**20):
                digest.update(chunk)
        finally:
            response.close()
            response.release_conn()
        if digest.hexdigest() != sha:
            raise UploadError(f"s3://{bucket}/{key}: read-back sha256 {digest.hexdigest()} != {sha}")
