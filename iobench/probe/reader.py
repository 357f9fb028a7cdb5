"""The records of a probed job's processes (iobench/probe/inject/_iobench_probe/records.py), read
back as they are written: each process's file is followed from where the last read stopped, whole
lines only, and every record lands in the ``Job`` it describes."""

from __future__ import annotations

import json
from collections import defaultdict, namedtuple
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .inject._iobench_probe.records import FIELDS, HOOK_ERROR_PREFIX

RECORDS: dict[str, type] = {
    kind: namedtuple(kind.capitalize(), names)  # the fields are FIELDS', known when it is read
    for kind, names in FIELDS.items()
}


def parse(line: str) -> tuple[str, Any] | None:
    """One record line as (kind, record); None for a line that is not one (torn, foreign)."""
    try:
        raw = json.loads(line)
        kind, values = raw[0], raw[1:]
        record = RECORDS[kind](*values)
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    return kind, record


@dataclass
class Job:
    """Everything the job's processes recorded so far."""

    hellos: dict[int, Any] = field(default_factory=dict)  # pid -> hello
    torch: dict[int, Any] = field(default_factory=dict)  # pid -> torch
    loaders: dict[str, Any] = field(default_factory=dict)  # tag -> loader
    epochs: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    steps: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    ends: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    fetches: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    workers: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    h2d: dict[int, list] = field(default_factory=lambda: defaultdict(list))  # pid -> copies
    pins: dict[int, list] = field(default_factory=lambda: defaultdict(list))
    device: dict[str, dict[int, float]] = field(default_factory=lambda: defaultdict(dict))  # tag -> step -> s
    alone: dict[str, Any] = field(default_factory=dict)
    stops: dict[str, Any] = field(default_factory=dict)
    skips: dict[str, Any] = field(default_factory=dict)  # tag -> the phase left out, and why
    errors: list = field(default_factory=list)  # (pid, error)
    hook_failures: dict[int, str] = field(default_factory=dict)  # pid -> traceback

    def add(self, pid: int, kind: str, r: Any) -> None:
        if kind == "hello":
            self.hellos[r.pid] = r
        elif kind == "torch":
            self.torch[pid] = r
        elif kind == "loader":
            self.loaders[r.tag] = r
        elif kind == "epoch":
            self.epochs[r.tag].append(r)
        elif kind == "step":
            self.steps[r.tag].append(r)
        elif kind == "end":
            self.ends[r.tag].append(r)
        elif kind == "fetch":
            self.fetches[r.tag].append(r)
        elif kind == "worker":
            self.workers[r.tag].append(r)
        elif kind == "h2d":
            self.h2d[pid].append(r)
        elif kind == "pin":
            self.pins[pid].append(r)
        elif kind == "device":
            self.device[r.tag][r.step] = r.seconds
        elif kind == "alone":
            self.alone[r.tag] = r
        elif kind == "stop":
            self.stops[r.tag] = r
        elif kind == "skip":
            self.skips[r.tag] = r
        elif kind == "error":
            self.errors.append((pid, r))

    @staticmethod
    def pid_of(tag: str) -> int:
        return int(tag.split("-", 1)[0])


class Follower:
    """Reads the new complete lines of every ``p<pid>.jsonl`` in a directory into one Job."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.job = Job()
        self._offsets: dict[Path, int] = {}

    def read(self) -> Job:
        for path in sorted(self.directory.glob("p*.jsonl")):
            try:
                pid = int(path.stem[1:])
            except ValueError:
                continue
            offset = self._offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
            if end == 0:
                continue
            self._offsets[path] = offset + end
            for line in chunk[:end].decode(errors="replace").splitlines():
                parsed = parse(line)
                if parsed is not None:
                    self.job.add(pid, *parsed)
        for path in self.directory.glob(f"{HOOK_ERROR_PREFIX}*.txt"):
            pid = int(path.stem[len(HOOK_ERROR_PREFIX) :])
            if pid not in self.job.hook_failures:
                self.job.hook_failures[pid] = path.read_text(errors="replace")
        return self.job
