"""This host's calibrations, in one store: what was measured here once and is reused (the decode +
augment rate per decoder, a trainer's host cost per model, device and batch size).

One file, ``<cache_dir>/calibrations.json`` (cachedir.py), keyed by the host a figure was measured
on (``this_host()``: its name and CPU model), then by what was calibrated and its key::

    {"format": 1, "hosts": {"node1 (AMD EPYC 9654)": {"decode_rate": {"crop": {...}},
                                                       "trainer_host": {"resnet50/cuda/256": {...}}}}}

A home shared by several hosts holds each one's calibrations apart. The files of earlier versions
(``decode-rate.json``, ``trainer-host.json``) are still read, beneath what the store holds, and are
carried into it by the next calibration of their kind.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Literal

from iobench.host.atomic import atomic_write_json
from iobench.host.cachedir import cache_dir
from iobench.host.machine import this_host

CalibrationKind = Literal["decode_rate", "trainer_host"]
STORE_FILE = "calibrations.json"
FORMAT = 1
# each kind's file before the store, and what it was named by
EARLIER_FILES: dict[CalibrationKind, str] = {
    "decode_rate": "decode-rate.json",
    "trainer_host": "trainer-host.json",
}


def store_path() -> Path:
    return cache_dir() / STORE_FILE


def trainer_key(model: str, device: str, batch_size: int) -> str:
    """A trainer's host cost is kept per model, device and batch size."""
    return f"{model}/{device}/{batch_size}"


def kept(kind: CalibrationKind) -> dict[str, dict[str, Any]]:
    """This host's calibrations of ``kind`` by key: the store's, over an earlier version's file's.
    A file that is missing or unreadable holds none."""
    return {**_earlier(kind), **_hosts().get(this_host(), {}).get(kind, {})}


def keep(kind: CalibrationKind, key: str, measured: dict[str, Any]) -> Path:
    """Keep ``measured`` as this host's calibration of ``kind`` ``key``, replacing the one before
    (and carrying an earlier version's file of that kind into the store). Returns the store's path."""
    hosts = _hosts()
    hosts.setdefault(this_host(), {})[kind] = {**kept(kind), key: measured}
    path = store_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"format": FORMAT, "hosts": hosts})
    return path


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _hosts() -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    doc = _read(store_path())
    hosts = doc.get("hosts") if isinstance(doc, dict) and doc.get("format") == FORMAT else None
    return hosts if isinstance(hosts, dict) else {}


def _earlier(kind: CalibrationKind) -> dict[str, dict[str, Any]]:
    doc = _read(cache_dir() / EARLIER_FILES[kind])
    if not isinstance(doc, dict):
        return {}
    if kind == "decode_rate":  # {"host": this_host(), "rates": {decoder: rate}}
        rates = doc.get("rates")
        return rates if doc.get("host") == this_host() and isinstance(rates, dict) else {}
    # {"host": hostname, "calibrations": [cost, ...]}; a file without a host was this one's
    entries = doc.get("calibrations")
    if doc.get("host", socket.gethostname()) != socket.gethostname() or not isinstance(entries, list):
        return {}
    try:
        return {trainer_key(e["model"], e["device"], e["batch_size"]): e for e in entries}
    except (KeyError, TypeError):
        return {}
