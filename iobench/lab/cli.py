"""`iobench lab up | down | status | purge | restart [DAEMON]`: its arguments and the command.

Exit status of ``status``: 0 every daemon up, 1 some daemon down (the lab is degraded), 3 none
running; 2 for a LabError (its message says what to read or do).
"""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console

from . import LabError, down, restart, status, up


def add_lab_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "up: start a lab, or bring an existing one back (the same cluster: pools, buckets, "
        "keys, files); down: stop it, keeping its data (--purge: remove it); restart [DAEMON]: one daemon "
        "or all, keeping the cluster; status: each daemon up/down with pid and log, and the health "
        "(exit 0 all up, 1 degraded, 3 not running)."
    )
    p.add_argument("lab_cmd", choices=["up", "down", "status", "purge", "restart"])
    p.add_argument(
        "daemon",
        nargs="?",
        choices=["mon", "mgr", "osd", "rgw", "mds", "fuse", "all"],
        help="with restart: the daemon to restart (default all)",
    )
    p.add_argument("--dir", help="lab directory (default ~/.cache/iobench/lab)")
    p.add_argument("--port", type=int, default=None, help="S3 port of radosgw (new lab: 7480)")
    p.add_argument("--cephfs", action="store_true", help="also run an MDS and mount CephFS at DIR/mnt")
    p.add_argument("--no-mgr", action="store_true", help="skip ceph-mgr (saves ~300 MB)")
    p.add_argument(
        "--objectstore",
        choices=["memstore", "bluestore"],
        default=None,
        help="new lab: memstore (default; RAM, fastest; keeps data across a clean stop only) or bluestore "
        "(a sparse file; keeps data even when the OSD is killed)",
    )
    p.add_argument("--purge", action="store_true", help="with down: also remove the lab directory")
    p.add_argument("--json", action="store_true", help="with status, down, restart: machine-readable output")


def lab_command(args: argparse.Namespace, console: Console) -> int:
    # plain print, not ``console``: `lab up`'s stdout is a line to source, and status is read by scripts
    if args.daemon is not None and args.lab_cmd != "restart":
        _say(f"iobench lab {args.lab_cmd}: a daemon name ({args.daemon}) goes with `restart` only")
        return 2
    try:
        return _COMMANDS[args.lab_cmd](args)
    except LabError as e:
        _say(f"iobench lab {args.lab_cmd}: {e}")
        return 2


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _up(args: argparse.Namespace) -> int:
    info = up(
        args.dir,
        port=args.port,
        with_mgr=False if args.no_mgr else None,
        cephfs=True if args.cephfs else None,
        objectstore=args.objectstore,
        progress=_say,
    )
    print(f". {info.env_file}")
    return 0


def _down(args: argparse.Namespace) -> int:
    res = down(args.dir, purge=args.lab_cmd == "purge" or args.purge)
    kept = (
        ""
        if res["purged"]
        else f"; the cluster's data is kept in {res['dir']} (`iobench lab up` brings it back, --purge removes it)"
    )
    print(
        json.dumps(res, indent=2)
        if args.json
        else f"stopped {', '.join(f'{n}: {h}' for n, h in res['stopped'].items()) or 'nothing'} "
        f"in {res['seconds']} s" + (", purged" if res["purged"] else kept)
    )
    return 0


def _restart(args: argparse.Namespace) -> int:
    res = restart(args.dir, args.daemon, progress=_say)
    for note in res["notes"]:
        _say(f"note: {note}")
    print(
        json.dumps(res, indent=2)
        if args.json
        else f"restarted {', '.join(f'{n} (was {h})' for n, h in res['restarted'].items())} "
        f"in {res['seconds']} s"
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    st = status(args.dir)
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        print(f"{st['dir']}: {st['health'] or 'no lab'}  endpoint {st['endpoint']}")
        if st["ceph_health"] and st["ceph_health"] != st["health"]:
            print(f"  (Ceph itself says {st['ceph_health']}: its map has not caught up)")
        for check, message in st["health_checks"].items():
            print(f"  {check}: {message}")
        for name, d in st["daemons"].items():
            rss = f"{d['rss_bytes'] / 2**20:.0f} MiB" if d["rss_bytes"] else ""
            print(f"  {name:<14} {d['state']:<5} pid {d['pid']:<8} {rss:>8}  log {d['log']}")
        if st["keeps"]:
            print(f"  object store: {st['keeps']}")
    if not st["running"]:
        return 3
    return 0 if st["complete"] else 1


_COMMANDS = {"up": _up, "down": _down, "purge": _down, "restart": _restart, "status": _status}
