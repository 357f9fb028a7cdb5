"""A probed job's records written by hand: the lines the hooks would have written for a loop whose
every number is chosen, so the probe's reading of them can be checked against the numbers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from iobench.probe.inject._iobench_probe.records import FIELDS, PHASE_MEASURED, log_name

PID = 4242


def record(kind: str, **values: object) -> list:
    """One record, its fields by name (every field of the kind must be given)."""
    assert set(values) == set(FIELDS[kind]), (kind, set(FIELDS[kind]) ^ set(values))
    return [kind, *(values[name] for name in FIELDS[kind])]


def hello(pid: int = PID, t: float = 0.0, *, ranks: dict[str, str] | None = None, python: str = "3") -> list:
    """The first record of a process of ``python train.py`` (``ranks``: its RANK and WORLD_SIZE, if any)."""
    return record(
        "hello",
        pid=pid,
        ppid=1,
        t=t,
        argv=["train.py"],
        executable="python",
        ranks=ranks or {},
        python=python,
    )


@dataclass
class Loop:
    """A loop that takes ``steps`` batches of ``batch`` samples from ``workers`` workers, waiting
    ``wait`` s for each and stepping ``step`` s on it; each batch was made in ``make`` s by its worker
    (split: ``cpu`` and ``runq`` per batch, the rest blocked), ready ``handover`` s before the loop had it."""

    steps: int = 60
    batch: int = 16
    workers: int = 2
    wait: float = 0.05
    step: float = 0.01
    make: float = 0.12
    cpu: float = 0.02
    runq: float = 0.0
    collate: float = 0.001
    handover: float = 0.002
    bytes_per_sample: int = 100_000
    start: float = 100.0
    pid: int = PID
    rank: int | None = None
    iterable: bool = False
    replayed: int = 0  # steps on replayed batches after the measured ones
    replay_step: float = 0.005
    records: dict[int, list[list]] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        return f"{self.pid}-0"

    def write(self, directory: Path, *, finished: bool = True) -> Path:
        """The records as the job's processes would have left them in ``directory``."""
        out = self.records
        ranks = {} if self.rank is None else {"RANK": str(self.rank), "WORLD_SIZE": "2"}
        main = out.setdefault(self.pid, [])
        main.append(hello(self.pid, self.start - 2, ranks=ranks, python="3.11"))
        main.append(record("torch", t=self.start - 1.5, version="2.13.0"))
        info = {
            "kind": "torch",
            "dataset": "train.Images",
            "iterable": self.iterable,
            "length": 10_000,
            "batch_size": self.batch,
            "workers": self.workers,
            "prefetch_factor": 2 if self.workers else 0,
            "root": None,
        }
        # the iterator asked for a second before the first next(): its workers made the first batches
        main.append(record("loader", tag=self.tag, t=self.start - 1.0, info=info))
        main.append(record("epoch", tag=self.tag, t=self.start - 1.0, t_ready=self.start - 0.9, epoch=0))
        t = self.start
        cpu = 1.0
        for k in range(self.steps + self.replayed + 1):
            replay = k >= self.steps
            wait = 0.0 if replay else self.wait
            t_return = t + wait
            main.append(
                record(
                    "step",
                    tag=self.tag,
                    t_call=t,
                    t_return=t_return,
                    cpu_call=cpu,
                    samples=self.batch,
                    phase=1 if replay else PHASE_MEASURED,
                )
            )
            if not replay:
                self._made(k, t_return)
            t = t_return + (self.replay_step if replay else self.step)
            cpu += 0.004
        for pid, records in out.items():
            with open(directory / log_name(pid), "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in records)
        return directory

    def _made(self, k: int, t_return: float) -> None:
        worker = k % self.workers if self.workers else -1
        pid = self.pid + 1 + worker if self.workers else self.pid
        t1 = t_return - self.handover
        t0 = t1 - self.make
        get_wall = self.make - self.collate
        self.records.setdefault(pid, []).append(
            record(
                "fetch",
                tag=self.tag,
                worker=worker,
                t0=t0,
                t1=t1,
                get_wall=get_wall,
                get_cpu=self.cpu,
                get_runq=self.runq,
                collate_wall=self.collate,
                collate_cpu=self.collate,
                collate_runq=0.0,
                samples=self.batch,
                rchar=self.batch * self.bytes_per_sample,
                read_bytes=0,
            )
        )
