"""What a Ceph cluster is, read over librados' mon_command (JSON), so no ``ceph`` CLI is needed.

``describe_cluster`` feeds reports: results are only comparable when the version, objectstore
(memstore keeps everything in OSD RAM; bluestore goes to disk) and replication are recorded.
It never raises for a field the cluster does not report (older releases, no mgr, missing caps):
that field is simply absent or None.
"""

from __future__ import annotations

import errno
import functools
import json
from typing import Any

from iobench.ceph.connection import connect
from iobench.ceph.radosfs import DEFAULT_APP, enable_application

__all__ = ["describe_cluster", "ensure_pool", "mon_json"]


class _MonGone(Exception):
    """A mon command timed out: the mons stopped answering, so no further field is asked for."""


def mon_json(cluster: Any, prefix: str, *, strict: bool = False, **args: Any) -> Any:
    """One mon command's JSON answer, or None when it fails or is not JSON (``strict``: a time-out
    raises _MonGone instead, so a description asks a dead mon once, not once per field)."""
    cmd = {"prefix": prefix, "format": "json", **args}
    try:
        ret, out, _ = cluster.mon_command(json.dumps(cmd), b"")
    except Exception as exc:  # a report field must never break the report
        if strict and (getattr(exc, "errno", None) == errno.ETIMEDOUT or "timed out" in str(exc).lower()):
            raise _MonGone(str(exc)) from None
        return None
    if ret == -errno.ETIMEDOUT and strict:
        raise _MonGone(f"`{prefix}` timed out")
    if ret != 0:
        return None
    try:
        return json.loads(out) if out.strip() else None
    except (ValueError, UnicodeDecodeError):
        return None


def describe_cluster(
    conffile: str | None = None,
    pool: str | None = None,
    *,
    name: str | None = None,
    keyring: str | None = None,
    cluster: str | None = None,
    timeout: float = 10,
) -> dict[str, Any]:
    """Version, fsid, health, OSDs (count, objectstore), mgr/mds, and ``pool``'s settings.

    An unreachable cluster gives ``{"reachable": False, "error": ...}`` instead of raising; one
    whose mons stop answering midway gives what was read and ``error`` (each mon command waits at
    most ``timeout`` s, and none is sent after one timed out).
    """
    try:
        handle = connect(
            conffile, name, keyring, connect_timeout=timeout, op_timeout=timeout, cluster=cluster
        )
    except Exception as exc:  # for reports: say why instead of failing
        return {"reachable": False, "error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"reachable": True}
    try:
        _describe(handle, out, pool)
    except _MonGone as exc:
        out["error"] = f"the mons stopped answering (a command waited {timeout:g} s: {exc})"
    return out


def _describe(cluster: Any, out: dict[str, Any], pool: str | None) -> None:
    ask = functools.partial(_mon_strict, cluster)
    try:
        out["fsid"] = cluster.get_fsid()
    except Exception:
        out["fsid"] = None

    version = ask("version") or {}
    out["version"] = version.get("version")
    out["version_short"] = _short_version(out["version"])
    versions = ask("versions")
    # per daemon type: a mixed-version cluster (mid-upgrade) shows up here
    out["versions"] = versions if isinstance(versions, dict) else None
    health = ask("health") or {}
    out["health"] = health.get("status")
    out["health_checks"] = sorted((health.get("checks") or {}).keys())

    osd = ask("osd stat") or {}
    osd = osd.get("osdmap", osd)  # older releases nest the counts under "osdmap"
    out["osds"] = {"total": osd.get("num_osds"), "up": osd.get("num_up_osds"), "in": osd.get("num_in_osds")}
    meta = ask("osd metadata")
    if isinstance(meta, list):
        out["osds"]["objectstore"] = _distinct(meta, "osd_objectstore")
        out["osds"]["device_class"] = _distinct(meta, "default_device_class")
    try:
        out["osd_max_object_size"] = int(cluster.conf_get("osd_max_object_size"))
    except Exception:
        out["osd_max_object_size"] = None

    mgr = ask("mgr stat")
    out["mgr"] = (
        {"available": mgr.get("available"), "active": mgr.get("active_name") or None}
        if isinstance(mgr, dict)
        else None
    )
    fsmap = ask("fs dump")
    if isinstance(fsmap, dict):
        filesystems = fsmap.get("filesystems") or []
        mds_up = sum(len((f.get("mdsmap") or {}).get("up") or {}) for f in filesystems)
        out["mds"] = {
            "filesystems": [(f.get("mdsmap") or {}).get("fs_name") for f in filesystems],
            "active": mds_up,
            "standby": len(fsmap.get("standbys") or []),
        }
    else:
        out["mds"] = None
    if pool:
        out["pool"] = _describe_pool(cluster, pool)


def _distinct(items: list[Any], key: str) -> list[Any]:
    """The values of ``key`` in the mappings among ``items``, each once, sorted; missing and null ones left out."""
    return sorted({v for m in items if isinstance(m, dict) and (v := m.get(key)) is not None})


def _mon_strict(cluster: Any, prefix: str, **args: Any) -> Any:
    return mon_json(cluster, prefix, strict=True, **args)


def _short_version(text: str | None) -> str | None:
    # "ceph version 16.2.15 (618f...) pacific (stable)" -> "16.2.15"
    if not text:
        return None
    parts = text.split()
    return parts[2] if len(parts) > 2 and parts[:2] == ["ceph", "version"] else None


def _describe_pool(cluster: Any, pool: str) -> dict[str, Any]:
    pools = _mon_strict(cluster, "osd pool ls", detail="detail")
    entry = next((p for p in pools or [] if isinstance(p, dict) and p.get("pool_name") == pool), None)
    if entry is None:
        return {"name": pool, "exists": False if isinstance(pools, list) else None}
    rule_id = entry.get("crush_rule")
    rules = _mon_strict(cluster, "osd crush rule dump")
    rule = next((r for r in rules or [] if isinstance(r, dict) and r.get("rule_id") == rule_id), None)
    return {
        "name": pool,
        "exists": True,
        "id": entry.get("pool_id"),
        "type": _pool_type(entry.get("type")),
        "size": entry.get("size"),
        "min_size": entry.get("min_size"),
        "pg_num": entry.get("pg_num"),
        "applications": sorted((entry.get("application_metadata") or {}).keys()),
        "crush_rule": rule.get("rule_name") if rule else rule_id,
        "erasure_code_profile": entry.get("erasure_code_profile") or None,
    }


def ensure_pool(
    conffile: str | None,
    pool: str,
    app: str = DEFAULT_APP,
    *,
    name: str | None = None,
    keyring: str | None = None,
    cluster: str | None = None,
) -> bool:
    """Create ``pool`` if missing and tag it with ``app`` (no POOL_APP_NOT_ENABLED); True if created.

    An existing pool that carries another application keeps it: re-tagging needs force and
    would mislabel a pool someone else owns.
    """
    from iobench.ceph.radosfs import RadosFileSystem

    fs = RadosFileSystem(
        conffile=conffile, name=name, keyring=keyring, cluster=cluster, skip_instance_cache=True
    )
    created = fs.ensure_pool(pool, app)
    if not created:
        enable_application(fs.cluster, pool, app)  # an untagged pre-existing pool
    return created


def _pool_type(code: Any) -> Any:
    # the mon's JSON says what it holds: a code other than these (or none) is shown as it came
    # type 1 = replicated, 3 = erasure (pg_pool_t::TYPE_*)
    return {1: "replicated", 3: "erasure"}.get(code, code)
