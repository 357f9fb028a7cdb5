"""Where a job's checkpoints should go and the write rate they need: the state's bytes, how often
it is saved and the share of time the user accepts to lose, against the write rates of the tiers
(given, from fio's write JSON, or measured by a sweep's checkpoint cells). Every figure carries its
source; docs/checkpoints.md derives the formulas.

A save blocks the job for b = bytes per node / write rate per node (sync), or for the copy into
host buffers (async with pinned staging); the share of time lost is b / (T + b) at interval T. An
asynchronous write, or the drain from local NVMe staging to the shared tier, must finish within the
interval. A restore reads every node's bytes back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from iobench.checkpoint.sizes import MODELS
from iobench.host.units import parse_bandwidth, parse_size

# mixed-precision Adam: bf16 weights (2) + fp32 master weights (4) + two fp32 moments (8)
BYTES_PER_PARAMETER = 14
# a pinned device-to-host copy per accelerator: about half of PCIe Gen5 x16's 64 GB/s under load
COPY_PER_ACCELERATOR = 25e9
DEFAULT_OVERHEAD = 0.01
_DURATION = re.compile(r"^\s*([\d.]+)\s*(s|sec|m|min|h|hr|hours?)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Sourced:
    value: float
    source: str


@dataclass(frozen=True)
class Placement:
    name: str
    blocked_s: float | None
    overhead: float | None  # the share of time the saves take from training
    meets: bool
    note: str


@dataclass(frozen=True)
class CheckpointSizing:
    state: Sourced  # bytes per checkpoint, every rank's
    interval_s: Sourced
    overhead: Sourced  # the share of time accepted
    accelerators: int
    per_node: Sourced
    nodes: int
    bytes_per_node: float
    sync_rate_per_node: float  # what a blocking save at the accepted share needs, bytes/s
    async_rate_per_node: float  # what a background write finishing within the interval needs
    copy_rate_per_node: Sourced
    rates: dict[str, Sourced] = field(default_factory=dict)  # a tier's write rate per node
    placements: tuple[Placement, ...] = ()
    answer: str = ""

    @property
    def sync_rate_cluster(self) -> float:
        return self.sync_rate_per_node * self.nodes

    @property
    def async_rate_cluster(self) -> float:
        return self.async_rate_per_node * self.nodes

    def restore_s(self, tier: str) -> float | None:
        """Seconds to read every node's share back at the tier's rate (its write rate where no read
        rate was given)."""
        rate = self.rates.get(tier)
        return self.bytes_per_node / rate.value if rate else None


def parse_duration(text: str) -> float:
    """Seconds in "30min", "1h", "90s" or "600"."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"--checkpoint-every={text!r}: expected a duration, e.g. 30min, 2h, 600s")
    unit = (m.group(2) or "s").lower()
    return float(m.group(1)) * (3600 if unit.startswith("h") else 60 if unit.startswith("m") else 1)


def state_of(model: str | None, params: str | None, size: str | None) -> Sourced:
    if size:
        return Sourced(float(parse_size(size)), f"given: --checkpoint-size {size}")
    if model:
        if model not in MODELS:
            raise ValueError(f"--checkpoint-model={model!r}: known models are {', '.join(MODELS)}")
        m = MODELS[model]
        return Sourced(float(m.checkpoint_bytes), f"{model}'s checkpoint in {m.source}")
    if params:
        n = parameters(params)
        return Sourced(
            n * BYTES_PER_PARAMETER,
            f"{params} parameters x {BYTES_PER_PARAMETER} bytes (bf16 weights, fp32 master weights and Adam moments)",
        )
    raise ValueError("checkpoint sizing needs --checkpoint-model, --checkpoint-params or --checkpoint-size")


def parameters(text: str) -> float:
    """A parameter count: "70B", "8.03e9", "405 billion"."""
    m = re.match(r"^\s*([\d.e+]+)\s*(k|m|b|bn|billion|g|t|trillion)?\s*$", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"--checkpoint-params={text!r}: expected a count, e.g. 70B or 7.0e10")
    scale = {"k": 1e3, "m": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9, "g": 1e9, "t": 1e12, "trillion": 1e12}
    return float(m.group(1)) * scale.get((m.group(2) or "").lower(), 1.0)


def write_rate(text: str) -> Sourced:
    """A write rate per node: "6GB/s", or fio's JSON output (its write bandwidth)."""
    path = Path(text)
    if path.is_file():
        jobs = json.loads(path.read_text()).get("jobs", [])
        bw = sum(float(j.get("write", {}).get("bw_bytes", 0)) for j in jobs)
        if bw <= 0:
            raise ValueError(f"{text}: fio's JSON holds no write bandwidth (run fio with --rw=write)")
        return Sourced(bw, f"fio write, {path.name}")
    return Sourced(parse_bandwidth(text), f"given: {text}")


def measured_rates(run_dirs: list[str]) -> tuple[dict[str, Sourced], Sourced | None]:
    """The best save rate per node of each shared destination in the runs' checkpoint cells, and the
    best of the node-local ones (a local disk: staging, never a checkpoint's last place)."""
    from iobench.results.api import load_summaries

    best: dict[str, Sourced] = {}
    local: Sourced | None = None
    for run in run_dirs:
        for s in load_summaries(run):
            f = s.checkpoint if s.ok else None
            if f is None or f.save.gb_per_s_per_node <= 0:
                continue
            name = f.settings.destination.name
            rate = Sourced(
                f.save.gb_per_s_per_node * 1e9, f"measured: {run}/{s.cell_id} ({f.writer}, {f.settings.mode})"
            )
            if f.settings.destination.tier.get("kind") == "local":
                local = rate if local is None or rate.value > local.value else local
            elif name not in best or rate.value > best[name].value:
                best[name] = rate
    return best, local


def size_checkpoints(
    state: Sourced,
    interval_s: Sourced,
    overhead: Sourced,
    accelerators: int,
    per_node: Sourced,
    rates: dict[str, Sourced],
    local: str | None = None,
) -> CheckpointSizing:
    """The sizing; ``local``: the name among ``rates`` that is node-local (staging) storage."""
    nodes = max(1, -(-accelerators // int(per_node.value)))
    per = state.value / nodes
    o, t = overhead.value, interval_s.value
    sync_need = per / (o / (1 - o) * t)
    async_need = per / t
    copy = Sourced(
        COPY_PER_ACCELERATOR * per_node.value,
        f"assumed: {COPY_PER_ACCELERATOR / 1e9:g} GB/s pinned device-to-host per accelerator x {int(per_node.value)}",
    )
    placements = _placements(per, t, o, rates, local, copy.value)
    sizing = CheckpointSizing(
        state,
        interval_s,
        overhead,
        accelerators,
        per_node,
        nodes,
        per,
        sync_need,
        async_need,
        copy,
        rates,
        tuple(placements),
    )
    return CheckpointSizing(**{**sizing.__dict__, "answer": _answer(sizing)})


def _placements(
    per: float, t: float, o: float, rates: dict[str, Sourced], local: str | None, copy: float
) -> list[Placement]:
    out = []
    staged = per / copy
    for name, rate in rates.items():
        if name == local:  # a node's own disk keeps a checkpoint only until the node fails: staging only
            continue
        b = per / rate.value
        out.append(
            Placement(f"{name}, sync", b, b / (t + b), b / (t + b) <= o, f"each save blocks {b:.1f} s")
        )
        fits = b <= t
        out.append(
            Placement(
                f"{name}, async_pinned", staged, staged / (t + staged), fits and staged / (t + staged) <= o,
                f"blocks for the copy ({staged:.1f} s); the write takes {b:.0f} s of the {t:.0f} s interval"
                + ("" if fits else ": longer than the interval, saves would queue"),
            )
        )  # fmt: skip
    if local in rates:
        b = per / rates[local].value
        for name, rate in rates.items():
            if name == local:
                continue
            drain = per / rate.value
            fits = drain <= t
            out.append(
                Placement(
                    f"{local} staging, then {name}", b, b / (t + b), fits and b / (t + b) <= o,
                    f"blocks {b:.1f} s writing {local}; the drain to {name} takes {drain:.0f} s of the {t:.0f} s interval",
                )
            )  # fmt: skip
    return out


def _answer(s: CheckpointSizing) -> str:
    ok = [p for p in s.placements if p.meets]
    if not s.rates:
        return "give the tiers' write rates (--checkpoint-rate NAME=RATE or a fio write JSON, or --results of checkpoint cells) to choose where"
    if not ok:
        best = min(s.placements, key=lambda p: p.overhead or 1.0)
        return f"no tier given meets {100 * s.overhead.value:g} %: the best, {best.name}, loses {100 * (best.overhead or 0):.1f} %"
    simplest = min(ok, key=lambda p: ("staging" in p.name, "async" in p.name, p.overhead or 0))
    return (
        f"{simplest.name}: {100 * (simplest.overhead or 0):.2f} % of the time ({simplest.note}); the simplest "
        "placement that meets it (sync before async, straight to the shared tier before local staging: node-local "
        "storage alone loses the checkpoint with its node)"
    )
