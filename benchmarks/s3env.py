"""An S3 endpoint for the benchmarks: the one in the environment, or a lab started for the run."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def s3_endpoint() -> Iterator[str]:
    """Yield an endpoint URL with credentials in os.environ; start (and stop) a lab if needed."""
    if os.environ.get("AWS_ENDPOINT_URL") and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        yield os.environ["AWS_ENDPOINT_URL"]
        return
    from iobench.lab import down, up

    lab_dir = os.path.join(tempfile.mkdtemp(prefix="ibb-", dir="/tmp"), "lab")
    lab = up(lab_dir, port=27480, mon_ports=(23300, 26789), with_mgr=False, memstore_bytes=4 << 30)
    saved = dict(os.environ)
    os.environ.update(lab.env)
    try:
        yield lab.env["AWS_ENDPOINT_URL"]
    finally:
        os.environ.clear()
        os.environ.update(saved)
        down(lab.dir, purge=True)
