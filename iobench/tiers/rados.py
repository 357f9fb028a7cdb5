"""Ceph RADOS read directly through librados (no gateway), optionally behind a shard cache on
local NVMe or in RAM ("Ceph + memory cache").

The cluster is found as the ceph tools find it (librados' own resolution: $CEPH_CONF,
/etc/ceph/$cluster.conf, ~/.ceph/$cluster.conf, ./$cluster.conf, then CEPH_ARGS), with the tier's
``conffile``, ``cluster``, ``user`` and ``keyring`` options overriding; the key comes from the keyring
(the one ceph.conf names, or librados' default for the user), so no secret ever passes through the
sweep file or the results. URLs are ``rados://pool/prefix`` and are read by iobench.ceph.radosfs.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from .base import Option, TierConfigError
from .objectstore import OBJECT_STORE_OPTIONS, ObjectStoreTier


class RadosTier(ObjectStoreTier):
    """A dataset under rados://pool/prefix, read with librados directly or through a shard cache."""

    kind: ClassVar[str] = "rados"
    scheme: ClassVar[str] = "rados"
    options: ClassVar[dict[str, Option]] = {
        "url": Option(
            str, required=True, help="rados://pool/prefix where `iobench dataset upload` put the dataset"
        ),
        "conffile": Option(
            str,
            help="ceph.conf of the cluster; default: librados' search ($CEPH_CONF, /etc/ceph/$cluster.conf, ...)",
        ),
        "cluster": Option(
            str, default="ceph", help="cluster name: picks /etc/ceph/$cluster.conf and keyrings"
        ),
        "user": Option(str, default="client.admin", help="cephx user, e.g. client.admin"),
        "keyring": Option(str, help="keyring file; default: the one the configuration names, else librados'"),
        **OBJECT_STORE_OPTIONS,
    }

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.pool, _, self.prefix = self.url[len("rados://") :].partition("/")
        conffile = self.config["conffile"]
        self.conffile = os.path.abspath(os.path.expanduser(conffile)) if conffile else None
        if self.conffile and not os.path.isfile(self.conffile):
            raise TierConfigError(f"rados tier: conffile {conffile!r} does not exist")
        keyring = self.config["keyring"]
        self.keyring = os.path.abspath(os.path.expanduser(keyring)) if keyring else None
        self.cluster_name = self.config["cluster"]
        self.user = self.config["user"]
        # the loaders open rados:// through fsspec; this makes the protocol known in this process
        # and the workers it forks even where the package's entry point is not installed
        from iobench.ceph.radosfs import register

        register()

    def storage_options(self) -> dict[str, Any]:
        # no secret here: the keyring path lives in ceph.conf. The deadline bounds every librados
        # operation (rados_osd_op_timeout, rados_mon_op_timeout) and the connection to the mons
        # (client_mount_timeout: the Python binding ignores connect()'s own timeout); the reader
        # bounds its retries by it too (SourceSpec.deadline_s)
        deadline = self.deadline_s
        return {
            "conffile": self.conffile,
            "cluster": self.cluster_name,
            "name": self.user,
            "keyring": self.keyring,
            "op_timeout": deadline,
            "connect_timeout": min(15.0, deadline),
        }

    def connection(self) -> dict[str, Any]:
        """How to reach the cluster, for the helpers of iobench.ceph (None: librados decides)."""
        return {
            "conffile": self.conffile,
            "name": self.user,
            "keyring": self.keyring,
            "cluster": self.cluster_name,
        }

    def where(self) -> str:
        return self.conffile or f"librados' default {self.cluster_name}.conf"

    def access_hint(self) -> str:
        return (
            f"Check that the cluster of {self.where()} is up (iobench lab status), that user "
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

        r = upload_rados(dataset_dir, self.url, **self.connection())
        return f"{self.url}: {len(r.uploaded)} uploaded, {len(r.skipped)} already there ({r.verified})"

    def describe_remote(self) -> dict[str, Any]:
        from iobench.ceph.cluster import describe_cluster

        return {
            "pool": self.pool,
            "prefix": self.prefix,
            "conffile": self.where(),
            "cluster_name": self.cluster_name,
            "user": self.user,
            "credentials_from": f"keyring {self.keyring}"
            if self.keyring
            else "the keyring the configuration names",
            "cluster": describe_cluster(
                pool=self.pool, timeout=min(10.0, self.deadline_s or 10.0), **self.connection()
            ),
        }
