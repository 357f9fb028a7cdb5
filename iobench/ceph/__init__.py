"""Ceph access: librados (connection, errors), the ``rados://`` fsspec filesystem, the cluster's
description, the CephFS client's admin socket, and uploading a dataset into a pool."""
