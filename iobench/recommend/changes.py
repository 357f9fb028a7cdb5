"""What would make an option reach the target AU, each change checked by pricing the option again
with it: decoding on the GPUs, a storage rate, more NVMe drives, more RAM, more cores. The cheapest
comes first: a change of software before a rate nobody measured yet (measuring it may show it is
there), then drives, RAM, cores, and last a faster store than the one measured."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypedDict, get_args

from iobench.analysis.verdict import AU_TARGET

from .calibrate import Calibration, Figure
from .placements import PlacementOption, Scenario, evaluate
from .rates import Setup
from .storages import BACKEND_NAMES

Kind = Literal["gpu-decode", "measure-rate", "drives", "ram", "cores", "faster-store"]
COST: tuple[Kind, ...] = get_args(Kind)  # a change of an earlier kind sorts first (Change.cost)
MAX_DRIVES = 32
MAX_CORES = 1024
GB = 1e9


class ChangeWhat(TypedDict, total=False):
    """What a change sets, as the scenario's fields (apply() reads them back), and the decoder;
    rate_key and rate: a storage tier's rate, with its key in the scenario's rates."""

    decode: str
    cores: int
    ram_bytes: float
    nvme_devices: int
    nvme_bytes: float
    nic_bytes_per_s: float
    rate_key: str
    rate: float


@dataclass(frozen=True)
class Change:
    """A change to the node or its storage, the option it makes reach the target, and the AU it
    reaches there (predicted again with the change)."""

    kind: Kind
    words: str
    option: str  # the option's label
    setup: Setup
    decode: str
    au: float
    what: ChangeWhat = field(default_factory=ChangeWhat)
    size: float = 0.0  # how large a change, relative to what the node has (to order within a kind)

    @property
    def cost(self) -> tuple[int, float]:
        return COST.index(self.kind), self.size


def apply(s: Scenario, what: ChangeWhat) -> Scenario:
    """``s`` with the change ``what`` made (its decode is the option's, not the scenario's)."""
    # ChangeWhat's node fields, each already of its Scenario field's type
    fields: dict[str, Any] = {
        k: v
        for k, v in what.items()
        if k in ("cores", "ram_bytes", "nvme_devices", "nvme_bytes", "nic_bytes_per_s")
    }
    s = replace(s, **fields)
    if "rate_key" in what:
        figure = Figure(float(what["rate"]), "the rate this change would need", origin="given")
        s = replace(s, rates=s.rates.with_tiers({str(what["rate_key"]): figure}))
    return s


def _check(
    s: Scenario,
    o: PlacementOption,
    cal: Calibration | None,
    kind: Kind,
    words: str,
    what: ChangeWhat,
    size: float,
) -> Change | None:
    decode = str(what.get("decode", o.decode))
    after = evaluate(apply(s, what), o.setup, decode, cal)
    if after is None or not after.reaches:
        return None
    return Change(kind, words, after.label, o.setup, decode, after.prediction.au or 0.0, what, size)


def _gpu_decode(s: Scenario, o: PlacementOption, cal: Calibration | None) -> Change | None:
    if o.decode != "cpu" or s.vendor != "nvidia":
        return None
    return _check(
        s,
        o,
        cal,
        "gpu-decode",
        "decode on the GPUs with NVIDIA DALI instead of the CPU",
        {"decode": "dali"},
        0.0,
    )


def _rate(s: Scenario, o: PlacementOption, cal: Calibration | None) -> Change | None:
    """The backend rate the option needs (a shared store's; the NVMe array's is drives)."""
    if o.rate_key in ("", "nvme") or o.delivered is not None:
        return None
    needed = o.backend_needed_bytes_per_s
    if needed is None and o.prediction.binding == "fetch" and not o.conditional:
        needed = _needed_known(o)
    if needed is None:
        return None
    needed *= 1.001  # just above, so the check lands on the target
    what: ChangeWhat = {"rate_key": o.rate_key, "rate": needed}
    nic = ""
    if s.nic_bytes_per_s and needed > s.nic_bytes_per_s:
        what["nic_bytes_per_s"] = needed
        nic = f" and a storage network of as much (the node has {s.units.rate(s.nic_bytes_per_s)})"
    name = BACKEND_NAMES.get(o.rate_key, "the backend")
    unknown = bool(o.conditional)
    words = (
        f"{'measure' if unknown else 'a store faster than'} {name}"
        + (": it needs" if unknown else " measured, one that delivers")
        + f" at least {s.units.rate(needed)} per node ({s.units.rate(needed * s.nodes)} for the {s.nodes} "
        f"node(s)){nic}"
    )
    measured = s.rates.tier(o.rate_key)
    size = needed / (measured.value if measured else needed)
    return _check(s, o, cal, "measure-rate" if unknown else "faster-store", words, what, size)


def _needed_known(o: PlacementOption) -> float | None:
    """The backend rate a fetch-bound option with known rates needs for the target: its backend
    scaled by the shortfall (the backend's share of the fetch scales with it)."""
    backend = o.inputs.get("backend bandwidth (bytes/s)")
    if backend is None or not math.isfinite(backend.value) or not o.prediction.au:
        return None
    return backend.value * AU_TARGET / o.prediction.au


def _drives(s: Scenario, o: PlacementOption, cal: Calibration | None) -> Change | None:
    """The fewest NVMe drives (of the node's size) with which the option fits and reaches it."""
    if o.setup not in ("local", "sharded", "object+nvme", "ceph+nvme") or s.rates.tier("nvme"):
        return None
    each = s.nvme_bytes / s.nvme_devices if s.nvme_devices else 3.84e12
    for n in range(s.nvme_devices + 1, MAX_DRIVES + 1):
        what: ChangeWhat = {"nvme_devices": n, "nvme_bytes": n * each}
        words = f"{n} NVMe drives of {s.units.size(each)} per node (it has {s.nvme_devices})"
        if (c := _check(s, o, cal, "drives", words, what, n / max(1, s.nvme_devices))) is not None:
            return c
    return None


def _ram(s: Scenario, o: PlacementOption, cal: Calibration | None) -> Change | None:
    if not any(x.startswith("RAM") for x in o.shortfalls):
        return None
    need = o.ram.loader_buffers_bytes + (o.cache_bytes if s.memory_cache_bytes is not None else 0.0)
    ram = math.ceil(need * 1.05 / (64 * GB)) * 64 * GB  # in 64 GB steps, with room for the system
    words = f"{s.units.size(ram)} of RAM per node (it has {s.units.size(s.ram_bytes)})"
    return _check(s, o, cal, "ram", words, {"ram_bytes": ram}, ram / s.ram_bytes)


def _cores(s: Scenario, o: PlacementOption, cal: Calibration | None) -> Change | None:
    if o.prediction.binding != "prep" and not any(x.startswith("cores") for x in o.shortfalls):
        return None
    start = max(s.cores + 1, math.ceil(o.cores_needed))
    for n in sorted({*range(start, start + 8), *(start * 2**k for k in range(1, 8))}):
        if n > MAX_CORES:
            break
        words = f"{n} cores per node (it has {s.cores})"
        if (c := _check(s, o, cal, "cores", words, {"cores": n}, n / s.cores)) is not None:
            return c
    return None


def changes(s: Scenario, opts: list[PlacementOption], cal: Calibration | None) -> list[Change]:
    """Every single change that makes one of ``opts`` reach the target, cheapest first, where none
    does yet; where no single change does, the changes of the best options together (checked the
    same way)."""
    if any(o.reaches for o in opts):
        return []  # the recommendation reaches it: nothing to change
    found: list[Change] = []
    for o in opts:
        found.extend(
            c for f in (_gpu_decode, _rate, _drives, _ram, _cores) if (c := f(s, o, cal)) is not None
        )
    if not found:
        found = _together(s, opts, cal)
    best: dict[tuple[str, str], Change] = {}
    for c in sorted(found, key=lambda c: c.cost):
        best.setdefault((c.kind, c.option), c)
    return sorted(best.values(), key=lambda c: c.cost)


def _together(s: Scenario, opts: list[PlacementOption], cal: Calibration | None) -> list[Change]:
    """The changes each option needs at once: more RAM and cores where it does not fit, then its
    storage's rate or drives on top."""
    out = []
    for o in opts[:6]:
        what: ChangeWhat = {}
        if any(x.startswith("RAM") for x in o.shortfalls):
            what["ram_bytes"] = math.ceil(o.ram.loader_buffers_bytes * 1.05 / (64 * GB)) * 64 * GB
        if any(x.startswith("cores") for x in o.shortfalls) or o.prediction.binding == "prep":
            what["cores"] = max(s.cores, math.ceil(o.cores_needed) + 1)
        step = apply(s, what)
        again = evaluate(step, o.setup, o.decode, cal)
        if again is None:
            continue
        for f in (_rate, _drives, _cores):
            extra = f(step, again, cal) if not again.reaches else None
            if extra is not None:
                what = {**what, **extra.what}
                break
        parts = [w for w in (_what_words(s, what),) if w]
        if (
            c := _check(s, o, cal, "cores" if "cores" in what else "ram", "; ".join(parts), what, 1.0)
        ) is not None:
            out.append(c)
    return out


def _what_words(s: Scenario, what: ChangeWhat) -> str:
    u, out = s.units, []
    if "ram_bytes" in what:
        out.append(f"{u.size(what['ram_bytes'])} of RAM per node")
    if "cores" in what:
        out.append(f"{what['cores']} cores per node")
    if "nvme_devices" in what:
        out.append(f"{what['nvme_devices']} NVMe drives per node")
    if "rate_key" in what:
        out.append(f"{BACKEND_NAMES.get(what['rate_key'])} at {u.rate(what['rate'])} per node")
    return " and ".join(out) + " together" if len(out) > 1 else "".join(out)
