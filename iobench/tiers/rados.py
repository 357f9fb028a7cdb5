"""Ceph RADOS read directly through librados (no gateway), optionally behind a shard cache on
local NVMe or in RAM ("Ceph + memory cache").

The cluster is reached through a ceph.conf (option ``conffile`` or CEPH_CONF); the key comes
from the keyring that ceph.conf names, so no secret ever passes through the sweep file or the
results. URLs are ``rados://pool/prefix`` and are read by iobench.ceph.radosfs.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from loaders.objectstore import DEADLINE_KEY

from .base import DEFAULT_DEADLINE_S, Option, TierConfigError
from .remote import REMOTE_OPTIONS, RemoteTier


class RadosTier(RemoteTier):
    """A dataset under rados://pool/prefix, read with librados directly or through a shard cache."""

    kind: ClassVar[str] = "rados"
    scheme: ClassVar[str] = "rados"
    options: ClassVar[dict[str, Option]] = {
        "url": Option(
            str, required=True, help="rados://pool/prefix where `iobench dataset upload` put the dataset"
        ),
        "conffile": Option(str, help="ceph.conf of the cluster; default CEPH_CONF"),
        "user": Option(str, default="client.admin", help="cephx user, e.g. client.admin"),
        **REMOTE_OPTIONS,
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.pool, _, self.prefix = self.url[len("rados://") :].partition("/")
        conffile = self.config["conffile"] or os.environ.get("CEPH_CONF")
        if not conffile:
            raise TierConfigError(
                "rados tier: no ceph.conf: set option conffile or CEPH_CONF (`source DIR/env` after "
                "`iobench lab up`)"
            )
        self.conffile = os.path.abspath(os.path.expanduser(conffile))
        self.user = self.config["user"]
        # the loaders open rados:// through fsspec; this makes the protocol known in this process
        # and the workers it forks even where the package's entry point is not installed
        from iobench.ceph.radosfs import register

        register()

    def storage_options(self) -> dict[str, Any]:
        # no secret here: the keyring path lives in ceph.conf. The deadline bounds every librados
        # operation (rados_osd_op_timeout, rados_mon_op_timeout) and the connection to the mons
        # (client_mount_timeout: the Python binding ignores connect()'s own timeout), and the reader's
        # retries (it takes deadline_s out of these options)
        deadline = self.deadline_s or DEFAULT_DEADLINE_S
        return {
            "conffile": self.conffile,
            "name": self.user,
            "op_timeout": deadline,
            "connect_timeout": min(15.0, deadline),
            DEADLINE_KEY: deadline,
        }

    def access_hint(self) -> str:
        return (
            f"Check that the cluster of {self.conffile} is up (iobench lab status), that user "
            f"{self.user} may read pool {self.pool!r}, and that the dataset was uploaded "
            "(`iobench dataset upload DATASET rados://pool/prefix`)."
        )

    def server_caches(self) -> str:
        return (
            "the OSDs' caches cannot be controlled from the client (memstore keeps every object in OSD "
            "RAM, so it is always 'warm'; bluestore has its own cache and the disks theirs) and may "
            "flatter repeated reads"
        )

    def upload_dataset(self, dataset_dir: str) -> str:
        from iobench.ceph.upload import upload_rados

        r = upload_rados(dataset_dir, self.url, conffile=self.conffile, name=self.user)
        return f"{self.url}: {len(r.uploaded)} uploaded, {len(r.skipped)} already there ({r.verified})"

    def describe_remote(self) -> dict[str, Any]:
        from iobench.ceph.cluster import describe_cluster

        return {
            "pool": self.pool,
            "prefix": self.prefix,
            "conffile": self.conffile,
            "user": self.user,
            "credentials_from": "keyring named in ceph.conf",
            "cluster": describe_cluster(
                self.conffile, self.pool, name=self.user, timeout=min(10.0, self.deadline_s or 10.0)
            ),
        }
