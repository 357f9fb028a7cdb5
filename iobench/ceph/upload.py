"""`iobench dataset upload DATASET rados://pool/prefix`: shards, indexes and manifest into RADOS.

Each object is written with librados (write_full, in pieces above 64 MiB) and carries its
sha256 as the xattr ``iobench.sha256``, set in the same op as the last piece: a re-run skips
objects whose size and xattr match (idempotent) and verification compares the pool against
the manifest. The manifest goes up last, so a reader that finds it can trust the shards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from iobench.ceph.cluster import ensure_pool
from iobench.ceph.radosfs import RadosFileSystem, split_path
from iobench.datasets.manifest import MANIFEST_NAME, Manifest
from iobench.datasets.upload import UploadError, UploadReport, upload_all, upload_files

__all__ = ["SHA_XATTR", "upload_rados"]

SHA_XATTR = "iobench.sha256"


def upload_rados(
    dataset_dir: str | Path,
    url: str,
    *,
    workers: int = 4,
    verify: str = "metadata",
    conffile: str | None = None,
    name: str | None = None,
    keyring: str | None = None,
    cluster: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> UploadReport:
    """Upload a complete local dataset to ``rados://pool/prefix``; ``verify="full"`` reads it back."""
    if verify not in ("metadata", "full"):
        raise ValueError(f"verify={verify!r}: allowed values are metadata, full")
    if not url.startswith("rados://"):
        raise ValueError(f"{url!r}: expected rados://pool/prefix")
    pool, prefix = split_path(url)
    if not pool:
        raise ValueError(f"{url!r}: expected rados://pool/prefix (no pool given)")
    root = Path(dataset_dir)
    manifest = Manifest.load(root)
    fs = RadosFileSystem(
        conffile=conffile, name=name, keyring=keyring, cluster=cluster, skip_instance_cache=True
    )

    files = upload_files(root, manifest)
    # refuse before writing anything: a half-staged dataset with one impossible shard helps nobody
    for path, rel, _ in files:
        fs.check_size(f"{pool}/{rel}", path.stat().st_size)

    report = UploadReport(
        url=url.rstrip("/"),
        verified="size+sha256 xattr" if verify == "metadata" else "full read-back sha256",
    )
    try:
        if ensure_pool(conffile, pool, name=name, keyring=keyring, cluster=cluster):
            report.created = f"the pool {pool}"
    except OSError as exc:
        raise UploadError(
            f"preparing pool {pool!r} on {fs.conffile or 'the default cluster'}: {exc}"
        ) from None

    def key_of(rel: str) -> str:
        return f"{pool}/{prefix}/{rel}" if prefix else f"{pool}/{rel}"

    def put(path: Path, rel: str, sha: str) -> tuple[str, bool]:
        key = key_of(rel)
        size = path.stat().st_size
        try:
            uploaded = not _already_there(fs, key, size, sha)
            if uploaded:
                # whole-file reads: objects are bounded by osd_max_object_size (checked above)
                fs.write_object(key, path.read_bytes(), {SHA_XATTR: sha.encode()})
            _verify(fs, key, size, sha, full=verify == "full")
        except UploadError:
            raise
        except OSError as exc:
            raise UploadError(f"uploading {path} to rados://{key}: {exc}") from None
        return key, uploaded

    upload_all(files, put, report, workers=workers, progress=progress)
    try:
        fs.write_object(key_of(MANIFEST_NAME), (root / MANIFEST_NAME).read_bytes())
    except OSError as exc:
        raise UploadError(f"uploading the manifest to rados://{key_of(MANIFEST_NAME)}: {exc}") from None
    report.objects += 1  # the manifest
    return report


def _already_there(fs: RadosFileSystem, key: str, size: int, sha: str) -> bool:
    try:
        info = fs.stat_object(key)  # not info(): a miss there lists the whole pool
    except FileNotFoundError:
        return False
    return info["size"] == size and fs.get_xattr(key, SHA_XATTR) == sha.encode()


def _verify(fs: RadosFileSystem, key: str, size: int, sha: str, *, full: bool) -> None:
    if not _already_there(fs, key, size, sha):
        raise UploadError(f"rados://{key}: after upload the pool reports a different size or sha256")
    if full:
        digest = hashlib.sha256(fs.cat_file(key)).hexdigest()
        if digest != sha:
            raise UploadError(f"rados://{key}: read-back sha256 {digest} != {sha}")
