"""Which of a sweep's measured figures carry over to the target node, and why.

``--results`` were measured somewhere (each cell's manifest.json names the host and the storage under
its tier); the recommendation is for the node the flags describe. Per-sample CPU costs carry over
(the model multiplies them by the target's demand and divides by the target's cores, never the
measuring host's), with a note where the CPU differs. A storage rate carries over only where it
measured the same kind of storage: a local tier on NVMe for the target's NVMe array, a remote
store that was not on the measuring host's own loopback. A rate measured on another kind of device
(a virtual machine's virtio disk) is not the target's NVMe RAID unless the user says it is the same
storage (``--same-storage``).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, replace

from iobench.host.units import format_bytes

from .calibrate import Calibration, TierFigures
from .placements import Scenario
from .servers import THIS_HOST


@dataclass(frozen=True)
class Carried:
    figure: str
    carried: bool
    why: str


def _hosts(cal: Calibration) -> str:
    seen = {
        (
            c.measured_on.hostname,
            c.measured_on.cpu_model,
            c.measured_on.usable_cpus,
            c.measured_on.memory_bytes,
        )
        for c in cal.cells
        if c.measured_on
    }
    return (
        "; ".join(f"{h} ({cpu}, {n} usable CPUs, {format_bytes(m)} RAM)" for h, cpu, n, m in sorted(seen))
        or "unknown hosts"
    )


def _tier(t: TierFigures, s: Scenario, same_storage: bool) -> tuple[bool, str]:
    on = t.measured_on
    where = on.device if on else "storage not described in the cells' manifests"
    said = " (--same-storage: the user says it is the target's storage)"
    if t.bandwidth is None:
        return False, "no cold cell measured it"
    if on and s.target.startswith(f"{THIS_HOST}:") and on.hostname == socket.gethostname():
        return True, f"measured on {where} of this very host, the target (--server {THIS_HOST})"
    if t.kind == "throttled":
        return True, f"a what-if: the configured link as its cells delivered it ({where})"
    if t.kind == "local" and on and on.device_kind == "pfs":
        return True, f"what one client ({on.hostname}) read from {where}" + (said if same_storage else "")
    if t.kind == "local":
        if on and on.device_kind in ("nvme", "nvme-raid"):
            return (
                True,
                f"measured on {where}: NVMe, as the target's ({s.nvme_devices} drive(s) per node); taken as its array",
            )
        if same_storage:
            return True, f"measured on {where}{said}"
        return False, (
            f"measured on {where}, another kind of storage than the target's NVMe "
            f"({s.nvme_devices} drive(s) per node): the drives' own figure stands; --same-storage if it is the same storage"
        )
    if on and on.loopback and not same_storage:
        return False, (
            f"measured against {where}: a store on the measuring host's own loopback (a lab) measures that host, "
            "not the target's; --same-storage if it is the same storage"
        )
    return True, f"what one client ({on.hostname if on else '?'}) read from {where}" + (
        said if same_storage else ""
    )


def carry_over(
    cal: Calibration, s: Scenario, *, same_storage: bool = False
) -> tuple[Calibration, list[Carried]]:
    """The calibration with only the figures that carry over to the target, and each decision."""
    out = [
        Carried(
            "CPU per sample (decode, augment, collate, loader overhead, training process)",
            True,
            f"measured on {_hosts(cal)}; per-sample costs, multiplied by the target's demand and divided by "
            f"its {s.cores} cores per node, not by the measuring host's. Another CPU decodes faster or slower: "
            "run `iobench inspect --accelerators ...` on the target to calibrate it",
        ),
        Carried(
            "accelerator demand",
            False,
            f"the target's: {s.per_accelerator.value:,.0f} samples/s per {s.accelerator} ({s.per_accelerator.source}); "
            "the cells' own consumers serve only to check the model against them (the prediction table)",
        ),
    ]
    tiers = {}
    for name, t in cal.tiers.items():
        ok, why = _tier(t, s, same_storage)
        bw = t.bandwidth
        figure = f"tier {name!r} ({t.kind}) bandwidth" + (f", {bw.value / 1e6:,.1f} MB/s" if bw else "")
        out.append(Carried(figure, ok, why))
        # the fetch stage's CPU per sample is a CPU cost: it carries whatever the storage
        tiers[name] = t if ok else replace(t, bandwidth=None)
    if cal.dali_gpu is not None:
        out.append(Carried("DALI decode per GPU", True, f"measured on a CUDA host: {cal.dali_gpu.source}"))
    return replace(cal, tiers=tiers), out
