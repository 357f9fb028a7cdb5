"""`iobench dataset upload DATASET s3://bucket/prefix`: upload shards, indexes and manifest.

boto3 does the uploads (parallel multipart for big shards), with botocore's own resolution of the
endpoint, region and credentials: ``--endpoint-url``, else ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL``, else the profile's ``endpoint_url`` in ``~/.aws/config``; the region from the
profile or ``AWS_REGION``/``AWS_DEFAULT_REGION``; the credentials from the environment, the
profile, SSO or an instance role, as every AWS tool resolves them. Each object carries its sha256
as user metadata, so a re-run skips what is already there and intact (idempotent), and
verification compares the store against the manifest. The manifest goes up last: a reader that
finds it can trust the shards are complete.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from iobench.datasets.manifest import MANIFEST_NAME, Manifest, sha256_file
from iobench.datasets.objects import INDEX_NAME, OBJECTS_DIR, load_object_index

SHA_META = "sha256"
_MISSING = ("404", "NoSuchKey", "NotFound", "NoSuchBucket")


class UploadError(OSError):
    """Staging failed: names the object, the endpoint and what to do; never a credential."""


@dataclass
class UploadReport:
    url: str
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    bytes_uploaded: int = 0
    verified: str = "size+sha256 metadata"
    created: str | None = None  # what the upload had to create first, in words ("the bucket b")
    objects: int = 0  # every object written or found intact, the manifest included


def split_s3_url(url: str) -> tuple[str, str]:
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"{url!r}: expected s3://bucket/prefix")
    return parsed.netloc, parsed.path.strip("/")


def s3_client(endpoint_url: str | None = None, region: str | None = None, profile: str | None = None):
    """A boto3 S3 client as the AWS tools resolve it (see the module docstring), and the endpoint
    it talks to (for messages)."""
    import boto3
    import botocore.config
    import botocore.exceptions

    if endpoint_url is not None:
        parsed = urlparse(endpoint_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"--endpoint-url {endpoint_url!r}: expected http(s)://host[:port]")
    try:
        session = boto3.Session(profile_name=profile)
    except botocore.exceptions.ProfileNotFound as exc:
        raise ValueError(f"--profile {profile}: {exc}") from None
    if session.get_credentials() is None:
        raise ValueError(
            "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(`source DIR/env` after `iobench lab up`), or give an AWS profile (--profile, AWS_PROFILE)"
        )
    config = botocore.config.Config(
        connect_timeout=5, read_timeout=120, retries={"total_max_attempts": 4, "mode": "standard"}
    )
    client = session.client("s3", endpoint_url=endpoint_url, region_name=region, config=config)
    return client, client.meta.endpoint_url


def _code(exc: Exception) -> str | None:
    return (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")


def _explain(exc: Exception, what: str, endpoint: str) -> UploadError:
    code = _code(exc)
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"):
        hint = "the credentials were refused: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile"
    elif code == "NoSuchBucket":
        hint = "the bucket does not exist"
    elif "EndpointConnectionError" in type(exc).__name__ or "Connect" in type(exc).__name__:
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
    from boto3.s3.transfer import TransferConfig

    if verify not in ("metadata", "full"):
        raise ValueError(f"verify={verify!r}: allowed values are metadata, full")
    root = Path(dataset_dir)
    manifest = Manifest.load(root)
    bucket, prefix = split_s3_url(url)
    client, endpoint = s3_client(endpoint_url, region, profile)
    report = UploadReport(
        url=url.rstrip("/"),
        verified="size+sha256 metadata" if verify == "metadata" else "full read-back sha256",
    )
    try:
        if not _bucket_exists(client, bucket):
            region_now = client.meta.region_name
            where = {} if region_now in (None, "us-east-1") else {"LocationConstraint": region_now}
            client.create_bucket(Bucket=bucket, **({"CreateBucketConfiguration": where} if where else {}))
            report.created = f"the bucket {bucket}"
    except Exception as exc:
        raise _explain(exc, f"checking bucket {bucket!r}", endpoint) from None
    transfer = TransferConfig(
        multipart_threshold=max(part_bytes, 5 * 2**20), multipart_chunksize=max(part_bytes, 5 * 2**20)
    )
    key_of = lambda name: f"{prefix}/{name}" if prefix else name  # noqa: E731

    def put(path: Path, name: str, sha: str) -> tuple[str, bool]:
        key = key_of(name)
        size = path.stat().st_size
        try:
            uploaded = not _already_there(client, bucket, key, size, sha)
            if uploaded:
                client.upload_file(
                    str(path), bucket, key, ExtraArgs={"Metadata": {SHA_META: sha}}, Config=transfer
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
        client.upload_file(
            str(root / MANIFEST_NAME), bucket, manifest_key, ExtraArgs={"ContentType": "application/json"}
        )
    except Exception as exc:
        raise _explain(exc, f"uploading the manifest to s3://{bucket}/{manifest_key}", endpoint) from None
    report.objects += 1  # the manifest
    return report


def _bucket_exists(client, bucket: str) -> bool:
    try:
        client.head_bucket(Bucket=bucket)
    except Exception as exc:
        if _code(exc) in _MISSING:
            return False
        raise
    return True


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
        for sample in load_object_index(json.loads(index.read_text()), str(index)):
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
            report.objects += 1
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
    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if _code(exc) in _MISSING:
            return False
        raise
    return head["ContentLength"] == size and (head.get("Metadata") or {}).get(SHA_META) == sha


def _verify(client, bucket: str, key: str, size: int, sha: str, *, full: bool) -> None:
    if not _already_there(client, bucket, key, size, sha):
        raise UploadError(f"s3://{bucket}/{key}: after upload the store reports a different size or sha256")
    if full:
        digest = hashlib.sha256()
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        try:
            for chunk in body.iter_chunks(2**20):
                digest.update(chunk)
        finally:
            body.close()
        if digest.hexdigest() != sha:
            raise UploadError(f"s3://{bucket}/{key}: read-back sha256 {digest.hexdigest()} != {sha}")
